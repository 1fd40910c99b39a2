// A flow balancer's local view as a graph (Boost.Graph), on which it chooses next hops: this
// node, its next-stage peers and the data holders they advertise a path to. Pure: no CAF, no
// clock; the balancer rebuilds it when its view changes (docs/routing.md, "The local view").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace gwtf::routing {

class view_graph {
public:
  /// The cheapest ring cost through one next hop.
  struct choice {
    std::size_t next = 0; ///< the next hop's index (in the order they were added)
    double cost = 0;      ///< d(self, next) + its cost to the target, then its load added
  };

  /// Starts an empty view. `next_is_target`: the next stage is the data holders, so each next
  /// hop is a target itself (a ring closes at its own data holder).
  void reset(bool next_is_target);

  /// A next hop at link cost `edge` (d(self, it)); the order of the calls breaks ties.
  /// With `next_is_target` it is also a new target, of the same index.
  std::size_t add_next(double edge);
  /// A data holder some next hop may reach (without `next_is_target`).
  std::size_t add_target();
  /// Next hop `next` advertises `cost` from it to target `target`; returns the path's index
  /// (SIZE_MAX when refused: with `next_is_target`, or an index out of range).
  std::size_t add_path(std::size_t next, std::size_t target, double cost);
  /// A path's advertised cost changed (the graph stays; only the next query sees it).
  void set_cost(std::size_t path, double cost);

  std::size_t next_hops() const { return edges_.size(); }
  /// Changes whenever the graph or a cost in it does (the same version: the same answers).
  std::uint64_t version() const { return version_; }
  std::size_t targets() const { return targets_; }

  /// For every target, the next hop on its cheapest ring and that ring's cost: a shortest
  /// path (Dijkstra) from this node. `load[n]` (may be empty: none) is added after next hop
  /// n's path cost (the flows already queued on its link); next hops with `excluded[n]` (may
  /// be empty) are left out. Ties: the next hop added first. Costs are summed as
  /// (edge + path) + load, as the balancer's adverts always were.
  std::vector<std::optional<choice>> cheapest(const std::vector<double>& load,
                                              const std::vector<char>& excluded) const;

  /// Per target, the cheapest ring and the cheapest through another next hop than that one.
  struct two_choices {
    std::optional<choice> best;
    std::optional<choice> other; ///< through a next hop other than best's
    /// What cheapest(load, excluded) gives for this target when only next hop `n` is excluded.
    const std::optional<choice>& avoiding(std::size_t n) const { return best && best->next == n ? other : best; }
  };
  /// For every target at once, the answers of cheapest(load, {n}) for every next hop n (the
  /// balancer's re-routing asks for the cheapest ring avoiding a flow's current next hop):
  /// the same choices and costs, bit for bit, in one walk over the graph's edges instead of
  /// one Dijkstra per excluded next hop. The graph is this node's edges to its next hops and
  /// theirs to the targets, so a ring through next hop n costs (edge + path) + load[n].
  std::vector<two_choices> cheapest_two(const std::vector<double>& load) const;

private:
  struct built; ///< the Boost.Graph of the view, built at the first query after a change
  const built& csr() const;
  mutable std::shared_ptr<const built> built_;
  /// The last query without exclusions and its answer, until the view changes.
  struct memo {
    std::vector<double> load;
    std::vector<std::optional<choice>> answer;
  };
  mutable std::optional<memo> memo_;
  std::uint64_t version_ = 0;
  bool next_is_target_ = false;
  std::vector<double> edges_;      ///< d(self, next hop n)
  std::size_t targets_ = 0;
  struct path {
    std::size_t next, target;
    double cost;
  };
  std::vector<path> paths_;
};

} // namespace gwtf::routing
