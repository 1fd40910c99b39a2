// The time on a log line: the UTC wall clock to the millisecond, "2026-11-28T16:14:04.123Z".
// It lines up across machines (NTP) and survives a host restarting itself, which a process's
// own clock (seconds since it started) does not.
#pragma once

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace gwtf {

inline std::string utc_stamp(std::chrono::system_clock::time_point at = std::chrono::system_clock::now()) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  ::gmtime_r(&secs, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(ms % 1000));
  return text;
}

} // namespace gwtf
