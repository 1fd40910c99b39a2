// CAF side: our config reaches CAF, our errors render, and an actor system runs with them.
#include <chrono>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <doctest/doctest.h>

#include "actors/errors.hpp"
#include "actors/system_setup.hpp"

using namespace gwtf::actors;

TEST_CASE("system_config carries scheduler size and failure detection into CAF") {
  node_config node;
  node.scheduler_threads = 3;
  fault_config faults;
  faults.heartbeat_interval_ms = 250;
  faults.connection_timeout_ms = 1000;
  system_config cfg{node, faults, false};
  CHECK(caf::get_or(cfg, "scheduler.max-threads", size_t{0}) == 3u);
  CHECK(caf::get_or(cfg, "middleman.heartbeat-interval", caf::timespan{0})
        == caf::timespan{std::chrono::milliseconds{250}});
  CHECK(caf::get_or(cfg, "middleman.connection-timeout", caf::timespan{0})
        == caf::timespan{std::chrono::milliseconds{1000}});
}

TEST_CASE("gwtf errors travel through an actor and render with their context") {
  system_config cfg{node_config{}, fault_config{}, false};
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  // An actor that rejects out-of-capacity admissions with a gwtf error value.
  auto admit = sys.spawn([]() -> caf::behavior {
    return {[](int requested) -> caf::result<int> {
      if (requested > 4)
        return make_error(ec::over_capacity, "requested " + std::to_string(requested) + " > 4");
      return requested;
    }};
  });
  caf::error got;
  int accepted = 0;
  sys.spawn([&](caf::event_based_actor* self) {
    self->request(admit, caf::infinite, 9).then([&](int x) { accepted = x; },
                                               [&](caf::error& e) { got = std::move(e); });
  });
  sched.run();
  CHECK(accepted == 0);
  CHECK(got == make_error(ec::over_capacity));
  CHECK(got.category() == error_category);
  CHECK(sys.render(got) == "gwtf: over_capacity (requested 9 > 4)");
  caf::anon_send_exit(admit, caf::exit_reason::kill);
  sched.run();
}

TEST_CASE("two actor systems talk over the middleman on loopback, gwtf errors cross intact") {
  // Two systems in one process stand for two hosts: publish, connect, request, error back.
  system_config server_cfg{node_config{}, fault_config{}, true};
  caf::actor_system server{server_cfg};
  auto admit = server.spawn([]() -> caf::behavior {
    return {[](int requested) -> caf::result<int> {
      if (requested > 4)
        return make_error(ec::over_capacity, "requested " + std::to_string(requested) + " > 4");
      return requested;
    }};
  });
  auto port = server.middleman().publish(admit, 0, "127.0.0.1", true);
  REQUIRE_MESSAGE(port, server.render(port.error()));
  REQUIRE(*port > 0);

  system_config client_cfg{node_config{}, fault_config{}, true};
  caf::actor_system client{client_cfg};
  auto remote = client.middleman().remote_actor("127.0.0.1", *port);
  REQUIRE_MESSAGE(remote, client.render(remote.error()));
  caf::scoped_actor self{client};
  int accepted = 0;
  caf::error rejected;
  self->request(*remote, std::chrono::seconds{30}, 3)
    .receive([&](int x) { accepted = x; }, [&](caf::error& e) { rejected = e; });
  CHECK(accepted == 3);
  CHECK_FALSE(rejected);
  self->request(*remote, std::chrono::seconds{30}, 9)
    .receive([&](int x) { accepted = x; }, [&](caf::error& e) { rejected = e; });
  CHECK(rejected == make_error(ec::over_capacity));
  CHECK(client.render(rejected) == "gwtf: over_capacity (requested 9 > 4)");
  caf::anon_send_exit(admit, caf::exit_reason::kill);
}
