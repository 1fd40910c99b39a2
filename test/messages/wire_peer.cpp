// A second process for the cross-process wire tests: publishes an actor on 127.0.0.1 that
// decodes every wire_frame it gets (with a size limit) and answers with the re-encoded
// message, or with the decode error. Prints "port N" once published; exits when stdin closes.
//
// usage: gwtf-wire-peer [MAX_MESSAGE_BYTES]
#include <cstdlib>
#include <iostream>
#include <string>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/system_setup.hpp"
#include "actors/net/wire_frame.hpp"

using namespace gwtf::actors;

int main(int argc, char** argv) {
  gwtf::wire::decode_limits limits;
  if (argc > 1)
    limits.max_bytes = std::strtoull(argv[1], nullptr, 10);
  system_config cfg{node_config{}, fault_config{}, true};
  caf::actor_system sys{cfg};
  auto served = std::make_shared<int>(0);
  auto echo = sys.spawn([limits, served]() -> caf::behavior {
    return {[limits, served](const wire_frame& frame) -> caf::result<wire_frame> {
      auto msg = open_frame(frame, limits);
      if (!msg)
        return std::move(msg.error()); // a bad frame is answered, never fatal
      ++*served;
      return make_frame(*msg);
    }};
  });
  auto port = sys.middleman().publish(echo, 0, "127.0.0.1", true);
  if (!port) {
    std::cerr << "gwtf-wire-peer: publish failed: " << sys.render(port.error()) << "\n";
    return 1;
  }
  std::cout << "port " << *port << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return 0;
}
