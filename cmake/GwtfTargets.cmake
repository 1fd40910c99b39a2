# Common settings for every caf-gwtf target.

# gwtf_target_defaults(<target>): warnings, include root, C++17.
function(gwtf_target_defaults target)
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(GWTF_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
