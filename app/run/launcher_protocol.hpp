// What a launched node's reporter (app/run/node_reporter.cpp) sends the launcher's driver
// (app/run/driver.cpp) over CAF's middleman: its host's reports, and its host's handles when
// it attaches. Checked at compile time at both ends.
#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/typed_actor.hpp>

#include "actors/protocols.hpp"

namespace gwtf::app {

/// The reporter protocol (actors/protocols.hpp) plus, when a node attaches or reconnects,
/// (register_atom, host, supervisor, link). The handles travel untyped: CAF's serialization
/// knows `caf::actor`; the driver casts them to supervisor_actor and net_link_actor.
using launcher_actor = actors::reporter_actor::extend<
    caf::reacts_to<actors::register_atom, std::string, caf::actor, caf::actor>>;

} // namespace gwtf::app
