#include "sim/simulator.hpp"

#include "sim/engine.hpp"

namespace gwtf::sim {

const char* to_string(sim_router r) {
  switch (r) {
    case sim_router::gwtf: return "gwtf";
    case sim_router::swarm: return "swarm";
    case sim_router::swarm_restart: return "swarm-restart";
    case sim_router::centralized: return "centralized";
    case sim_router::atom: return "atom";
  }
  return "?";
}

const char* to_string(sim_event_kind k) {
  switch (k) {
    case sim_event_kind::crash: return "crash";
    case sim_event_kind::leave: return "leave";
    case sim_event_kind::join: return "join";
    case sim_event_kind::degrade: return "degrade";
  }
  return "?";
}

sim_result simulate(const sim_scenario& s, sim_router router) {
  if (router == sim_router::atom)
    return simulate_atom(s);
  engine e{s, router};
  return e.run();
}

} // namespace gwtf::sim
