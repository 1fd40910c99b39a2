// The meters behind the shell's `actors`, `top` and `trace`: a metered actor counts every
// message it handles (CAF's consume hook), and records what they were while traced.
#include <caf/all.hpp>

#include <doctest/doctest.h>

#include "actors/inspect/actor_meter.hpp"
#include "actors/interfaces.hpp"
#include "actors/system_setup.hpp"
#include "actors/net/wire_frame.hpp"

using namespace gwtf::actors;

namespace {

using echo_actor = caf::typed_actor<caf::reacts_to<tick_atom>, caf::reacts_to<deliver_atom, std::string, wire_frame>,
                                    caf::replies_to<std::int32_t>::with<std::int32_t>>;
struct echo_state {
  int ticks = 0;
};

echo_actor::behavior_type echo(caf::stateful_actor<echo_state, metered<echo_actor::base>>* self,
                               std::shared_ptr<const host_meters> meters) {
  self->meter(meters->of("probe"), meters);
  return {
    [self](tick_atom) { ++self->state.ticks; },
    [](deliver_atom, const std::string&, const wire_frame&) {},
    [](std::int32_t x) { return x + 1; },
  };
}

} // namespace

TEST_CASE("a metered actor counts every message it handles and records them while traced") {
  system_config cfg{node_config{}, fault_config{}, false};
  cfg.set("scheduler.policy", caf::atom("testing"));
  caf::actor_system sys{cfg};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  auto meters = std::make_shared<host_meters>();
  auto meter = meters->of("probe");
  REQUIRE(meter != nullptr);
  CHECK(meters->of("scheduler") == nullptr);
  auto a = sys.spawn(echo, meters);
  for (int i = 0; i < 3; ++i)
    caf::anon_send(a, tick_atom::value);
  sched.run();
  CHECK(meter->actor_id() == a->id()); // bound when its behavior function ran
  CHECK(meters->name_of(a->id()) == "probe");
  CHECK(meter->handled() == 3);
  CHECK_FALSE(meter->tracing());

  REQUIRE(meter->start_trace());
  CHECK_FALSE(meter->start_trace()); // one trace at a time
  caf::anon_send(a, deliver_atom::value, std::string{"r2"}, make_frame(gwtf::wire::leave{"r2", 7, true}));
  std::int32_t answer = 0;
  sys.spawn([&](caf::event_based_actor* self) {
    meters->of("balancer")->bind(self->id()); // a sender the host knows by name
    self->request(a, caf::infinite, std::int32_t{41}).then([&](std::int32_t x) { answer = x; });
  });
  sched.run();
  CHECK(answer == 42);
  CHECK(meter->handled() == 5);
  std::uint64_t dropped = 7;
  auto entries = meter->stop_trace(dropped);
  CHECK_FALSE(meter->tracing());
  CHECK(dropped == 0);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].what.find("deliver \"r2\" leave (") == 0);
  CHECK(entries[0].from == "-"); // anonymous
  CHECK(entries[1].what == "41");
  CHECK(entries[1].from == "balancer");
  CHECK(entries[0].at_us <= entries[1].at_us);
  caf::anon_send(a, tick_atom::value); // not traced any more, still counted
  sched.run();
  CHECK(meter->handled() == 6);
  CHECK(meter->stop_trace(dropped).empty());
  caf::anon_send_exit(a, caf::exit_reason::kill);
  sched.run();
}

TEST_CASE("a trace keeps at most trace_capacity messages and counts the rest") {
  actor_meter m;
  REQUIRE(m.start_trace());
  for (std::size_t i = 0; i < actor_meter::trace_capacity + 5; ++i)
    m.record("x", "tick");
  std::uint64_t dropped = 0;
  CHECK(m.stop_trace(dropped).size() == actor_meter::trace_capacity);
  CHECK(dropped == 5);
  m.record("x", "tick"); // after the end: not kept
  REQUIRE(m.start_trace());
  CHECK(m.stop_trace(dropped).empty());
  CHECK(dropped == 0);
}
