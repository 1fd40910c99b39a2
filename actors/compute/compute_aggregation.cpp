// The iteration boundary of a replica (share, average, apply; driven by iteration_barrier),
// the stage-state download, the replica vote and the stall report (docs/runtime.md).
#include "actors/compute/compute_internal.hpp"
#include "actors/core/key_digest.hpp"

namespace gwtf::actors::compute {

void enter_download(self_ptr self, const std::string& from, bool withdraw = true);
bool check_vote(self_ptr self, std::uint64_t i);

// --- the iteration boundary ----------------------------------------------------------


wire::gradient_chunk share_chunk(const compute_state& st, std::uint64_t i, const share_data& mine) {
  wire::gradient_chunk c;
  c.iteration = i;
  c.stage = static_cast<std::uint32_t>(st.ctx->stage);
  c.contributors = {me(st)};
  c.microbatches = static_cast<std::uint64_t>(mine.count);
  c.offset = 0;
  c.total_elements = mine.count > 0 ? static_cast<std::uint64_t>(mine.values.shape[0]) : 0;
  c.values = mine.count > 0 ? mine.values : wire::tensor_payload{wire::dtype::float32, {0}, nullptr, 0, false, {}};
  for (auto& [holder, n] : mine.holders)
    c.holders.push_back({holder, static_cast<std::uint32_t>(n)});
  c.keys_digest = mine.digest;
  return c;
}

// The roster's name of a data holder index (microbatch keys carry the index).
std::string holder_name(const compute_state& st, std::uint32_t index) {
  auto& roster = st.ctx->spec->holders;
  return index < roster.size() ? roster[index] : "holder #" + std::to_string(index);
}

// The gradient sum this replica shares of iteration i: at a relay stage, once stage 0's
// verdict is in, over the microbatches of the holders it names only.
const std::map<std::string, std::uint32_t>* share_filter(const compute_state& st, std::uint64_t i) {
  return is_holder(st) ? nullptr : st.barrier->verdict(i);
}

void send_share_chunks(self_ptr self, const std::vector<std::string>& to, const wire::gradient_chunk& whole) {
  auto& st = self->state;
  auto pieces = cut_share(whole, wire_chunk_bytes(*st.ctx->spec) / std::max<std::size_t>(1, wire::dtype_size(whole.values.type)));
  // Chunk by chunk to every replica: each gets its first chunk as early as possible.
  for (auto& piece : pieces)
    for (auto& r : to)
      send_share_piece(self, r, piece);
}

void send_share_piece(self_ptr self, const std::string& to, const wire::gradient_chunk& piece) {
  auto& st = self->state;
  st.metrics.share_bytes += piece.values.size + piece.scales.size() * sizeof(float);
  st.ctx->send(self, to, service::stage, piece);
}

// Iteration i's parts count for nothing (whole shares from here on): their counts in the
// shares, and those that came before this replica shared, go.
void drop_parts(compute_state& st, std::uint64_t i) {
  st.agg.bfly[i].early.clear();
  auto& sh = st.agg.shares[i];
  for (auto it = sh.begin(); it != sh.end();)
    it = it->second.part ? sh.erase(it) : std::next(it);
}

// A view of values [span.begin, span.end) of `whole` (float32 or int64; no copy).
wire::tensor_payload value_slice(const wire::tensor_payload& whole, share_span span) {
  auto width = wire::dtype_size(whole.type);
  return {whole.type, {static_cast<std::int64_t>(span.size())},
          std::shared_ptr<const std::uint8_t>(whole.bytes, whole.bytes.get() + span.begin * width),
          static_cast<std::size_t>(span.size()) * width, false, {}};
}

// Whether the stage's sums are exact (int64 shares; training.reproducible_sums: exact).
bool exact_sums(const compute_state& st) {
  return st.ctx->spec->training.reproducible_sums == model::sum_order::exact;
}

// `c` (a whole share as it goes on the wire: encoded values, scales) cut to `span`.
wire::gradient_chunk chunk_part(const wire::gradient_chunk& c, share_span span) {
  auto p = c;
  if (c.total_elements == 0)
    return p; // an empty share: its count and holders go to every owner as they are
  auto width = wire::dtype_size(c.values.type);
  p.offset = span.begin;
  p.values.shape = {static_cast<std::int64_t>(span.size())};
  p.values.size = static_cast<std::size_t>(span.size()) * width;
  p.values.bytes = std::shared_ptr<const std::uint8_t>(c.values.bytes, c.values.bytes.get() + span.begin * width);
  if (c.values.type == wire::dtype::int8) {
    auto first = static_cast<std::ptrdiff_t>(span.begin / share_int8_block);
    p.scales.assign(c.scales.begin() + first,
                    c.scales.begin() + first + static_cast<std::ptrdiff_t>(model::share_int8_blocks(span.size())));
  }
  return p;
}

// Sends each replica of the round its part of `c` (chunk by chunk, to all in turn) and keeps
// this replica's own part (decoded `mine`) for its sum.
void send_parts(self_ptr self, butterfly_state& b, wire::gradient_chunk c, const share_data& mine) {
  auto& st = self->state;
  auto& round = *b.round;
  c.group = round.group();
  auto max = wire_chunk_bytes(*st.ctx->spec) / std::max<std::size_t>(1, wire::dtype_size(c.values.type));
  std::vector<std::pair<std::string, std::vector<wire::gradient_chunk>>> out;
  for (std::size_t j = 0; j < round.group().size(); ++j)
    if (j != round.index())
      out.emplace_back(round.group()[j], cut_share(chunk_part(c, round.part(j)), max));
  for (std::size_t k = 0;; ++k) {
    bool any = false;
    for (auto& [to, pieces] : out)
      if (k < pieces.size()) {
        send_share_piece(self, to, pieces[k]);
        any = true;
      }
    if (!any)
      break;
  }
  round.add_part(me(st), mine.count, mine.count > 0 ? value_slice(mine.values, round.mine()) : wire::tensor_payload{});
}

// Sends this replica's gradient sum of iteration i to the live replicas of its stage (again
// after a repair changed it: receivers keep the latest share of each replica): by butterfly
// (its parts to their owners) from butterfly_min_group replicas on, else whole to every one.
void send_share(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  auto* verdict = share_filter(st, i);
  std::set<std::uint32_t> kept;
  if (verdict)
    for (std::uint32_t h = 0; h < st.ctx->spec->holders.size(); ++h)
      if (verdict->count(st.ctx->spec->holders[h]) > 0)
        kept.insert(h);
  auto g = verdict ? st.model->gradients(i, kept) : st.model->gradients(i);
  auto* sum = value_or_report(self, g, "gradient sum of iteration " + std::to_string(i));
  if (!sum)
    return;
  st.agg.shared.insert(i);
  share_data mine;
  mine.count = sum->count;
  for (auto& [h, n] : sum->holders)
    mine.holders[holder_name(st, h)] = n;
  std::optional<model::encoded_share> encoded;
  if (sum->count > 0) {
    std::vector<torch::Tensor> parts;
    for (auto& t : sum->sums)
      parts.push_back(t.reshape({-1}));
    // Exact sums stay int64 (their compression is fp32, validated); others go as float32.
    auto flat = torch::cat(parts).to(exact_sums(st) ? torch::kLong : torch::kFloat).contiguous();
    auto how = st.ctx->spec->training.share_compression;
    if (how != model::share_compression::fp32) {
      // The replicas average what they decode: this replica averages its own share as
      // encoded too, so that every replica's step stays bit-identical.
      auto n = static_cast<std::size_t>(flat.numel());
      std::vector<float>* feedback = nullptr;
      if (how == model::share_compression::int8) {
        // What the shares so far lost: the residual after the last step, or (overlap: the
        // share before this one is not stepped yet) what that share left.
        auto prev = i > 0 ? st.agg.next_residual.find(i - 1) : st.agg.next_residual.end();
        auto& base = prev != st.agg.next_residual.end() ? prev->second : st.agg.residual;
        auto& next = st.agg.next_residual[i];
        next = base.size() == n ? base : std::vector<float>(n, 0.0f);
        feedback = &next;
      }
      encoded = model::encode_share(how, flat.data_ptr<float>(), n, feedback);
    }
    mine.values = to_payload(flat);
  }
  // The exactly-once report: each key as many times as its gradients were added (a double
  // addition shows as the key twice, which the check reports as counted twice).
  std::vector<std::uint64_t> keys;
  auto report = [&](std::uint64_t k) {
    keys.insert(keys.end(), std::max<std::uint32_t>(1, st.model->additions(k)), k);
  };
  if (is_holder(st)) {
    for (auto& [k, o] : st.holder.origins)
      if (o.done && k >> 24 == i) // overlap: the origins of the iteration before are kept too
        report(k);
  } else {
    for (auto& [k, r] : st.ledger->records())
      if (r.mb.iteration == i && r.backward_done && st.model->counted(k)
          && (!verdict || kept.count(r.mb.holder) > 0))
        report(k);
    for (auto& [k, mb] : st.stash.swarm_counted) // SWARM's backward calls (compute_swarm.cpp)
      if (mb.iteration == i && st.model->counted(k) && (!verdict || kept.count(mb.holder) > 0))
        report(k);
  }
  tell(self, st.ctx->reporter, share_atom::value, me(st), static_cast<std::uint32_t>(st.ctx->stage), i, keys);
  mine.digest = key_digest(keys);
  auto c = share_chunk(st, i, mine);
  for (auto& [h, d] : st.barrier->reports(i))
    c.reports.push_back(d);
  if (encoded) {
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(encoded->bytes));
    auto type = encoded->how == model::share_compression::bf16 ? wire::dtype::bfloat16 : wire::dtype::int8;
    c.values = {type, {static_cast<std::int64_t>(c.total_elements)}, std::shared_ptr<const std::uint8_t>(bytes, bytes->data()),
                bytes->size(), false, {}};
    c.scales = std::move(encoded->scales);
  }
  // By butterfly when the stage has enough replicas and this iteration did not fall back;
  // the round's group is fixed by the first share (a re-share after a verdict goes to the
  // same owners; a changed group falls back).
  auto group = same_stage(st);
  group.push_back(me(st));
  std::sort(group.begin(), group.end());
  auto& b = st.agg.bfly[i];
  bool butterfly = st.ctx->spec->training.share_exchange == model::share_exchange::butterfly && !b.whole
                   && !st.draining && group.size() >= butterfly_min_group;
  if (butterfly && b.round && b.round->group() != group) { // the group changed since: whole shares
    butterfly = false;
    ++st.metrics.butterfly_fallbacks;
    tell(self, st.ctx->reporter, verdict_atom::value, me(st),
         "iteration " + std::to_string(i) + ": butterfly averaging falls back to whole shares (its stage's replicas "
           "changed before it shared again)");
  }
  if (!butterfly) { // what came as parts (early, or of a round it leaves) counts for nothing
    drop_parts(st, i);
    b.round.reset();
  }
  b.whole = !butterfly;
  std::vector<std::pair<std::string, wire::gradient_chunk>> early;
  if (butterfly) {
    bool first = !b.round;
    if (first)
      b.round.emplace(group, me(st), st.agg.share_elements, exact_sums(st) ? wire::dtype::int64 : wire::dtype::float32);
    send_parts(self, b, c, mine);
    if (first) {
      early = std::move(b.early);
      b.early.clear();
    }
  } else {
    send_share_chunks(self, same_stage(st), c); // drop_parts above emptied `early`
  }
  st.agg.shares[i][me(st)] = std::move(mine);
  st.barrier->share(i, me(st));
  if (!butterfly && crash_now(self, "averaging")) { // an injected crash: its share is out, its step never comes
    st.ready = false;
    return;
  }
  for (auto& [from, m] : early) // the result is the caller's try_average
    on_butterfly(self, from, std::move(m));
}

// Falls back to whole shares for iteration i (a replica of the round gone, groups that
// differ, a whole share came): what came as parts is void; this replica sends its share
// whole if it shared, and so makes every stage-mate fall back too.
void enter_whole(self_ptr self, std::uint64_t i, const std::string& why) {
  auto& st = self->state;
  auto& b = st.agg.bfly[i];
  if (b.whole || st.agg.averaged.count(i) > 0)
    return;
  bool had = b.round.has_value();
  b.whole = true;
  b.round.reset();
  b.reduce_error.clear();
  drop_parts(st, i);
  if (!had)
    return;
  ++st.metrics.butterfly_fallbacks;
  tell(self, st.ctx->reporter, verdict_atom::value, me(st),
       "iteration " + std::to_string(i) + ": butterfly averaging falls back to whole shares (" + why + ")");
  if (st.agg.shared.count(i) > 0 && open_iteration(st, i) && st.ready)
    send_share(self, i);
}

void whole_share_came(self_ptr self, std::uint64_t i, const std::string& from) {
  enter_whole(self, i, "a whole share came from " + from); // not shared yet: it will share whole
}

void butterfly_peer_down(self_ptr self, const std::string& id) {
  auto& st = self->state;
  for (auto& [i, b] : st.agg.bfly)
    if (b.round && !b.whole && b.round->index_of(id) && st.agg.averaged.count(i) == 0)
      enter_whole(self, i, id + " of its group is gone");
}

// The owner's sum of its part over `tag` goes to every replica of the round (all-gather),
// encoded as the shares are; the owner keeps the decoded sum, as the others get it.
void send_reduced(self_ptr self, std::uint64_t i, butterfly_state& b, const share_tag& tag, wire::tensor_payload sum) {
  auto& st = self->state;
  // An injected crash (fault phase averaging): every contributor's part is in, their sum
  // never goes out; the others wait for it until they see this host go.
  if (crash_now(self, "averaging")) {
    st.ready = false;
    return;
  }
  auto& round = *b.round;
  auto span = round.mine();
  auto how = st.ctx->spec->training.share_compression;
  wire::gradient_chunk c;
  c.iteration = i;
  c.stage = static_cast<std::uint32_t>(st.ctx->stage);
  c.offset = span.begin;
  c.total_elements = st.agg.share_elements;
  c.group = round.group();
  c.reduced = true;
  std::map<std::string, std::int64_t> holders;
  for (auto& [r, n] : tag) {
    c.contributors.push_back(r);
    c.counts.push_back(static_cast<std::uint64_t>(n));
    c.microbatches += static_cast<std::uint64_t>(n);
    for (auto& [h, k] : st.agg.shares[i][r].holders)
      holders[h] += k;
  }
  for (auto& [h, k] : holders)
    c.holders.push_back({h, static_cast<std::uint32_t>(k)});
  auto n = static_cast<std::size_t>(span.size());
  if (how == model::share_compression::fp32) { // float32, or exact int64: as summed
    c.values = sum;
    round.add_reduced(round.index(), tag, std::move(sum));
  } else {
    auto decoded = std::make_shared<std::vector<float>>(n);
    if (n > 0)
      std::memcpy(decoded->data(), sum.bytes.get(), n * sizeof(float));
    std::vector<float> lost;
    if (how == model::share_compression::int8)
      lost.assign(n, 0.0f);
    auto enc = model::encode_share(how, decoded->data(), n, lost.empty() ? nullptr : &lost);
    b.reduce_error = std::move(lost);
    auto bytes = std::make_shared<std::vector<std::uint8_t>>(std::move(enc.bytes));
    c.values = {how == model::share_compression::bf16 ? wire::dtype::bfloat16 : wire::dtype::int8,
                {static_cast<std::int64_t>(n)}, std::shared_ptr<const std::uint8_t>(bytes, bytes->data()), bytes->size(),
                false, {}};
    c.scales = std::move(enc.scales);
    round.add_reduced(round.index(), tag,
                      {wire::dtype::float32, {static_cast<std::int64_t>(n)},
                       std::shared_ptr<const std::uint8_t>(decoded, reinterpret_cast<const std::uint8_t*>(decoded->data())),
                       n * sizeof(float), false, {}});
  }
  round.mark_sent(tag);
  std::vector<std::string> to;
  for (auto& r : round.group())
    if (r != me(st) && st.peers.count(r) > 0)
      to.push_back(r);
  send_share_chunks(self, to, c);
}

boundary on_butterfly(self_ptr self, const std::string& from, wire::gradient_chunk&& m) {
  auto& st = self->state;
  auto i = m.iteration;
  auto& b = st.agg.bfly[i];
  for (auto& d : m.reports) // holders' reports this replica may not hear itself
    take_report(st, std::move(d));
  m.reports.clear();
  if (b.whole)
    return boundary::none; // it fell back: the sender will too, on its whole share
  if (!m.reduced) { // a part of from's share: its count and holders are what the barrier counts
    share_data s;
    s.count = static_cast<std::int64_t>(m.microbatches);
    for (auto& h : m.holders)
      s.holders[h.holder] += h.microbatches;
    s.part = true;
    s.digest = m.keys_digest;
    st.agg.shares[i][from] = std::move(s);
    st.barrier->share(i, from);
  }
  if (!b.round) {
    b.early.emplace_back(from, std::move(m));
    return boundary::none;
  }
  if (m.group != b.round->group()) {
    enter_whole(self, i, from + " cut its share among other replicas");
    return boundary::none;
  }
  if (m.reduced) {
    share_tag tag;
    for (std::size_t k = 0; k < m.contributors.size(); ++k)
      tag[m.contributors[k]] = static_cast<std::int64_t>(m.counts[k]);
    if (auto at = b.round->index_of(from))
      b.round->add_reduced(*at, std::move(tag), std::move(m.values));
  } else {
    b.round->add_part(from, static_cast<std::int64_t>(m.microbatches), std::move(m.values));
  }
  return boundary::none;
}

// A draining host is done once it shared its part of the iteration in progress, or has no
// part in it: then the supervisor may announce LEAVE. A relay also waits for stage 0's
// verdict and shares within it: once gone it could not share again without a holder that
// stage 0 left out, and its stage-mates would wait for that share.
void maybe_drained(self_ptr self) {
  auto& st = self->state;
  if (!st.draining)
    return;
  // The open iterations: `current`, and with overlap the one before it until its step.
  std::vector<std::uint64_t> open{st.current};
  if (oldest_open(st) < st.current)
    open.insert(open.begin(), oldest_open(st));
  auto stake = [&](std::uint64_t i) {
    bool any = false;
    if (is_holder(st)) {
      any = i == st.current ? st.holder.running : true; // an earlier one: it shared it before it moved on
    } else {
      for (auto& [k, r] : st.ledger->records())
        any = any || r.mb.iteration == i;
      for (auto& [k, mb] : st.stash.swarm_counted) // SWARM's backward calls it counted
        any = any || mb.iteration == i;
    }
    return any;
  };
  for (auto i : open)
    if (stake(i) && st.agg.shared.count(i) == 0)
      return;
  // Gone, it could not reduce its part: the stage falls back to whole shares, its own sent
  // whole before it leaves.
  for (auto i : open)
    if (auto b = st.agg.bfly.find(i); b != st.agg.bfly.end() && b->second.round)
      enter_whole(self, i, me(st) + " is leaving");
  for (auto i : open)
    if (stake(i) && !is_holder(st)) {
      auto mine = st.agg.shares[i].find(me(st));
      if (!st.barrier->verdict_settled(i, st.gone) || mine == st.agg.shares[i].end()
          || !st.barrier->outside_verdict(i, mine->second.holders).empty())
        return;
    }
  st.draining = false;
  self->send(st.supervisor, drained_atom::value, true);
}

// A data holder's report, from the holder or relayed in a share. Only the roster's holders
// count, and only they are waited for: a name from a peer is not trusted to exist.
void take_report(compute_state& st, wire::iteration_done&& d) {
  auto& roster = st.ctx->spec->holders;
  auto listed = [&](const std::string& h) { return std::find(roster.begin(), roster.end(), h) != roster.end(); };
  if (!listed(d.holder))
    return;
  d.participants.erase(std::remove_if(d.participants.begin(), d.participants.end(),
                                      [&](const std::string& h) { return !listed(h); }),
                       d.participants.end());
  st.barrier->holder_done(d);
}

boundary try_share(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready || i != st.current || st.agg.shared.count(i) > 0
      || !st.barrier->holders_done(i, live_holders(st), st.gone))
    return boundary::none;
  send_share(self, i);
  st.agg.shared_ms.emplace(i, steady_ms());
  maybe_drained(self);
  auto b = try_average(self, i);
  if (b != boundary::none || !overlapped(st))
    return b;
  return try_advance(self);
}

// training.averaging overlap: `current` is shared, so the step before it comes now (its
// averaging ran while `current` computed) and the next iteration starts, on weights without
// `current`'s step; that step comes at the next boundary.
boundary try_advance(self_ptr self) {
  auto& st = self->state;
  if (!overlapped(st) || !st.ready || st.agg.shared.count(st.current) == 0)
    return boundary::none;
  if (next_step(st) < st.current)
    return try_apply(self, next_step(st)); // advances after the step
  st.current += 1; // nothing to step (the first iteration, or one resumed without a pending step)
  st.agg.fresh = false;
  return boundary::stepped;
}

// Exactly once in node mode (actors/core/key_digest.hpp): the shares just averaged hold each
// microbatch of their holders once, 0..n-1 each; else an error line and a metric.
void check_exactly_once(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  auto& roster = st.ctx->spec->holders;
  std::uint64_t got = 0;
  std::int64_t counted = 0;
  std::map<std::uint32_t, std::int64_t> per_holder;
  std::string stranger;
  for (auto& [r, sh] : st.agg.shares[i]) {
    if (sh.count == 0)
      continue;
    got += sh.digest;
    counted += sh.count;
    for (auto& [h, n] : sh.holders) {
      auto at = std::find(roster.begin(), roster.end(), h);
      if (at == roster.end())
        stranger = h;
      else
        per_holder[static_cast<std::uint32_t>(at - roster.begin())] += n;
    }
  }
  if (stranger.empty() && got == expected_digest(i, per_holder))
    return;
  ++st.metrics.exactly_once_violations;
  std::string shares; // whose shares, with what: where to look
  for (auto& [r, sh] : st.agg.shares[i]) {
    if (sh.count == 0)
      continue;
    shares += (shares.empty() ? "" : ", ") + r + " " + std::to_string(sh.count) + " (";
    std::string sep;
    for (auto& [h, n] : sh.holders) {
      shares += sep + h + " " + std::to_string(n);
      sep = ", ";
    }
    shares += ")";
  }
  report_failure(self, "exactly-once: stage " + std::to_string(st.ctx->stage) + " iteration " + std::to_string(i)
                         + ": the averaged shares do not hold each of their " + std::to_string(counted)
                         + " microbatches once"
                         + (stranger.empty() ? std::string{" (a microbatch added twice, or one missing)"}
                                             : " (holder '" + stranger + "' is not in the roster)")
                         + "; shares: " + shares);
}

boundary try_average(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready || !open_iteration(st, i) || st.agg.averaged.count(i) > 0 || st.agg.shared.count(i) == 0)
    return boundary::none;
  // Every microbatch the data holders finished must be in the shares. A replica that died
  // before its share arrived had its microbatches re-sent to the others (hop_ledger), which
  // share again once they have counted them; empty shares change nothing and are not waited for.
  std::int64_t counted = 0;
  for (auto& [r, sh] : st.agg.shares[i])
    counted += sh.count;
  // At stage 0 a data holder's microbatches are counted by that holder alone and never come
  // back: a dead holder whose share did not arrive takes its finished microbatches with it.
  if (is_holder(st))
    for (auto& [holder, rep] : st.barrier->reports(i))
      if (st.gone.count(holder) > 0 && st.agg.shares[i].count(holder) == 0)
        counted += static_cast<std::int64_t>(rep.microbatches);
  // At a relay stage only the holders of stage 0's verdict count: wait for it to be settled
  // (every holder it names sent its own, or went down), and for every share that counts
  // another holder to come again without it (on_verdict).
  if (!is_holder(st)) {
    if (!st.barrier->verdict_settled(i, st.gone))
      return boundary::none;
    for (auto& [r, sh] : st.agg.shares[i])
      if (!st.barrier->outside_verdict(i, sh.holders).empty())
        return boundary::none;
  }
  if (!st.barrier->shares_complete(i, me(st), counted))
    return boundary::none;
  auto params = st.model->parameters();
  std::vector<model::gradient_sum> sums;
  std::vector<std::string> contributors;
  // By butterfly: this replica's part summed over the contributors goes to the others, and
  // the sum is whole once every part's owner sent its own over the same contributors. A
  // contributor outside the round (a replica met after this one shared) falls back.
  std::map<std::string, share_data> summed; // butterfly: the whole sum, as one share
  if (auto b = st.agg.bfly.find(i); b != st.agg.bfly.end() && b->second.round && !b->second.whole) {
    auto& round = *b->second.round;
    share_tag tag;
    for (auto& [r, sh] : st.agg.shares[i])
      if (sh.count > 0)
        tag[r] = sh.count;
    for (auto& [r, n] : tag)
      if (!round.index_of(r)) {
        enter_whole(self, i, r + " shared outside the group");
        return boundary::none;
      }
    if (!tag.empty() && round.mine().size() > 0 && round.sent() != tag)
      if (auto part = round.reduce(tag))
        send_reduced(self, i, b->second, tag, std::move(*part));
    if (!tag.empty()) {
      auto whole = round.assemble(tag);
      if (!whole)
        return boundary::none;
      if (st.agg.butterfly_noted != round.group().size()) { // said once per group size: how the stage averages
        st.agg.butterfly_noted = round.group().size();
        auto n = round.group().size();
        tell(self, st.ctx->reporter, verdict_atom::value, me(st),
             "iteration " + std::to_string(i) + ": stage " + std::to_string(st.ctx->stage) + " averages by butterfly among "
               + std::to_string(n) + " replicas (each sends " + std::to_string(2 * (n - 1)) + "/" + std::to_string(n)
               + " of a share, not " + std::to_string(n - 1) + " shares)");
      }
      auto& one = summed[tag.begin()->first];
      for (auto& [r, n] : tag)
        one.count += n;
      one.values = std::move(*whole);
    }
  }
  for (auto& [replica, s] : summed.empty() ? st.agg.shares[i] : summed) { // replica-name order: bit-identical everywhere
    if (s.count == 0)
      continue;
    contributors.push_back(replica);
    model::gradient_sum g;
    g.count = s.count;
    if (s.count > 0) {
      auto flat = to_torch(s.values);
      std::int64_t off = 0;
      for (auto& p : params) {
        auto n = p.tensor.numel();
        if (off + n > flat.numel())
          break;
        g.sums.push_back(flat.narrow(0, off, n).view(p.tensor.sizes()));
        off += n;
      }
      if (off != flat.numel() || g.sums.size() != params.size()) {
        report_failure(self, "gradient share of " + replica + " has " + std::to_string(flat.numel())
                               + " elements; this stage has " + std::to_string(off));
        continue;
      }
    }
    sums.push_back(std::move(g));
  }
  if (!summed.empty()) { // the contributors are the sum's
    contributors.clear();
    for (auto& [r, sh] : st.agg.shares[i])
      if (sh.count > 0)
        contributors.push_back(r);
  }
  std::int64_t total = 0;
  for (auto& g : sums)
    total += g.count;
  std::vector<torch::Tensor> avg;
  if (total > 0) {
    avg = model::average(sums);
  } else {
    for (auto& p : params)
      avg.push_back(torch::zeros_like(p.tensor));
  }
  double sq = model::stage::squared_norm(avg);
  st.agg.averaged[i] = std::move(avg);
  std::vector<std::uint64_t> digests; // which of a contributor's reports the average used
  for (auto& who : contributors)
    digests.push_back(st.agg.shares[i][who].digest);
  tell(self, st.ctx->reporter, averaged_atom::value, me(st), static_cast<std::uint32_t>(st.ctx->stage), i,
       contributors, digests);
  check_exactly_once(self, i);
  wire::norm_share n{i, static_cast<std::uint32_t>(st.ctx->stage), sq, {}};
  // Stage 0's norm carries its verdict: the holders whose microbatches it averaged. Every
  // other stage averages those holders' microbatches only.
  if (is_holder(st))
    for (auto& who : contributors)
      n.holders.push_back({who, static_cast<std::uint32_t>(st.agg.shares[i][who].count)});
  st.agg.my_norm[i] = n;
  for (auto& [id, s] : st.peers)
    st.ctx->send(self, id, service::stage, n);
  st.barrier->norm(i, n.stage, sq);
  return try_apply(self, i);
}

boundary on_verdict(self_ptr self, std::uint64_t i, const std::string& from,
                    const std::vector<wire::holder_count>& holders) {
  auto& st = self->state;
  if (is_holder(st))
    return boundary::none;
  st.barrier->verdict(i, from, holders);
  // This replica's share counted a holder that stage 0 did not: it goes again without it
  // (receivers keep the latest share of each replica).
  if (open_iteration(st, i) && st.ready && st.agg.shared.count(i) > 0) {
    auto mine = st.agg.shares[i].find(me(st));
    if (mine != st.agg.shares[i].end()) {
      auto out = st.barrier->outside_verdict(i, mine->second.holders);
      if (!out.empty()) {
        std::string what;
        std::int64_t left_out = 0;
        for (auto& h : out) {
          what += (what.empty() ? "" : ", ") + h;
          left_out += mine->second.holders[h];
        }
        tell(self, st.ctx->reporter, verdict_atom::value, me(st),
             "shares iteration " + std::to_string(i) + " again without " + std::to_string(left_out)
                 + " microbatch(es) of " + what + ": stage 0 did not count them");
        send_share(self, i);
      }
    }
    maybe_drained(self); // a leaving relay waited for this verdict
  }
  return try_average(self, i);
}

// The global norm of iteration i: from every stage's norm, or the one a loaded state carried.
std::optional<double> norm_of(const compute_state& st, std::uint64_t i) {
  if (auto n = st.barrier->global_norm(i))
    return n;
  if (auto l = st.agg.loaded_norm.find(i); l != st.agg.loaded_norm.end())
    return l->second;
  return std::nullopt;
}

std::optional<model::pending_update> pending_step(const compute_state& st) {
  auto i = next_step(st);
  if (!st.ready || !overlapped(st) || i >= st.current || st.agg.averaged.count(i) == 0)
    return std::nullopt;
  auto norm = norm_of(st, i);
  if (!norm)
    return std::nullopt;
  return model::pending_update{static_cast<std::int64_t>(i), *norm, st.agg.averaged.at(i)};
}

void install_pending(compute_state& st, std::optional<model::pending_update>&& p) {
  st.agg.loaded_norm.clear();
  if (!p)
    return;
  auto i = static_cast<std::uint64_t>(p->iteration);
  st.agg.averaged[i] = std::move(p->averaged);
  st.agg.loaded_norm[i] = p->global_norm;
  st.agg.shared.insert(i); // it counts as averaged here: nothing of it is shared again
  st.current = i + 1;
}

boundary try_apply(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready || !open_iteration(st, i) || i != next_step(st) || st.agg.averaged.count(i) == 0)
    return boundary::none;
  auto norm = norm_of(st, i);
  if (!norm)
    return boundary::none;
  // With overlap the step waits for the next iteration's boundary (the weights stay as they
  // are while it computes), but for the last iteration: no compute follows it.
  if (overlapped(st)) {
    if (st.agg.shared.count(i + 1) == 0 && i + 1 < st.ctx->spec->end_iteration()) {
      pending_complete(self); // complete: a due checkpoint and waiting joiners get it
      return boundary::none;
    }
    // Taken at once (its average came after the next boundary): the checkpoint due and the
    // joiners waiting get the state with it first. (Served only when a step waits, joiners
    // starved while every average came late; a joiner served now may be one step behind and
    // load again, as in sync.)
    pending_complete(self);
  }
  auto r = st.model->apply(st.agg.averaged[i], static_cast<std::int64_t>(i), *norm);
  if (!value_or_report(self, r, "optimizer step " + std::to_string(i)))
    return boundary::none;
  // Stashes never used by a backward (a re-routed stream) were wasted compute.
  double wasted = 0;
  auto now = steady_ms();
  auto shared = st.agg.shared_ms.find(i);
  st.agg.last_aggregation = aggregation_state::aggregation{i, now, shared == st.agg.shared_ms.end() ? 0 : now - shared->second};
  st.agg.shared_ms.erase(st.agg.shared_ms.begin(), st.agg.shared_ms.upper_bound(i));
  for (auto k : st.ledger->finish(i)) {
    st.stash.arrived_ms.erase(k);
    if (st.model->drop(k))
      wasted += st.stash.fwd_seconds.count(k) ? st.stash.fwd_seconds[k] : 0.0;
    st.stash.forget(k);
  }
  swarm_forget(st, i);
  report_in_flight(self);
  if (wasted > 0)
    report_compute(self, i, 0, wasted);
  st.agg.averaged.erase(i);
  if (auto r = st.agg.next_residual.find(i); r != st.agg.next_residual.end())
    st.agg.residual = std::move(r->second);
  st.agg.next_residual.erase(st.agg.next_residual.begin(), st.agg.next_residual.upper_bound(i));
  // What the encoding of this replica's butterfly sum lost goes into its next share too (the
  // next sum counts it once, as it would have counted it now).
  if (auto b = st.agg.bfly.find(i); b != st.agg.bfly.end() && b->second.round && !b->second.reduce_error.empty()) {
    auto span = b->second.round->mine();
    if (st.agg.residual.size() != st.agg.share_elements)
      st.agg.residual.assign(static_cast<std::size_t>(st.agg.share_elements), 0.0f);
    for (std::size_t k = 0; k < b->second.reduce_error.size() && span.begin + k < st.agg.residual.size(); ++k)
      st.agg.residual[span.begin + k] += b->second.reduce_error[k];
  }
  st.agg.bfly.erase(st.agg.bfly.begin(), st.agg.bfly.upper_bound(i));
  st.agg.last_share.reset();
  if (auto mine = st.agg.shares[i].find(me(st)); mine != st.agg.shares[i].end()) {
    st.agg.last_share = share_chunk(st, i, mine->second);
    for (auto& [h, d] : st.barrier->reports(i))
      st.agg.last_share->reports.push_back(d);
  }
  st.agg.shares.erase(i);
  st.agg.shared.erase(st.agg.shared.begin(), st.agg.shared.upper_bound(i));
  st.agg.loaded_norm.erase(st.agg.loaded_norm.begin(), st.agg.loaded_norm.upper_bound(i));
  if (st.agg.incoming)
    st.agg.incoming->forget_before(i + 1);
  // The norm of i stays until i + 1 is applied: a peer that learns of this host only now
  // (catch_up) may still be in i and wait for it (a launch run once stalled for good so).
  st.agg.my_norm.erase(st.agg.my_norm.begin(), st.agg.my_norm.lower_bound(i));
  st.barrier->finish(i);
  // Sync: the next iteration starts. Overlap: i + 1 was shared (its boundary), the next starts.
  st.current = overlapped(st) ? std::max(st.current, st.agg.shared.count(i + 1) > 0 ? i + 2 : i + 1) : i + 1;
  st.agg.fresh = false;
  if (st.holder.last_done && st.holder.last_done->iteration <= i)
    st.holder.last_done.reset();
  auto h = st.model->weights_hash();
  st.agg.vote.mine(i, h);
  tell(self, st.ctx->reporter, applied_atom::value, me(st), static_cast<std::uint32_t>(st.ctx->stage), i, h);
  st.agg.last_hash = wire::replica_hash{i, static_cast<std::uint32_t>(st.ctx->stage), h};
  for (auto& r : same_stage(st))
    st.ctx->send(self, r, service::stage, *st.agg.last_hash);
  maybe_checkpoint(self, i);
  check_vote(self, i); // diverged: not ready until the download, so the next steps wait
  if (overlapped(st) && next_step(st) < st.current)
    try_apply(self, next_step(st)); // the last iteration's step at once; else complete, due at the next boundary
  return boundary::stepped;
}

void serve_state(self_ptr self, const std::string& from, const wire::state_request& r) {
  auto& st = self->state;
  if (!st.ready) {
    st.ctx->send(self, from, service::stage, wire::state_chunk{r.transfer_id, r.stage, 0, 0, {}});
    return;
  }
  std::optional<model::pending_update> p;
  if (overlapped(st) && next_step(st) < st.current) {
    p = pending_step(st);
    if (!p) { // its averaging is under way: served once it is complete (a request per peer, the newest)
      auto& d = st.agg.deferred_requests;
      d.erase(std::remove_if(d.begin(), d.end(), [&](auto& q) { return q.first == from; }), d.end());
      if (d.size() < 256) // bounded: a flood of requests is served to none beyond
        d.emplace_back(from, r);
      return;
    }
  }
  auto blob = st.model->export_state(p ? &*p : nullptr);
  // Chunks of node.chunk_bytes, at most half the peers' frame limit.
  auto chunk = wire_chunk_bytes(*st.ctx->spec);
  for (std::size_t off = 0; off < blob.size(); off += chunk) {
    auto n = std::min(chunk, blob.size() - off);
    wire::state_chunk c{r.transfer_id, r.stage, off, blob.size(),
                        std::vector<std::uint8_t>(blob.begin() + static_cast<std::ptrdiff_t>(off),
                                                  blob.begin() + static_cast<std::ptrdiff_t>(off + n))};
    st.ctx->send(self, from, service::stage, c);
  }
}

void pending_complete(self_ptr self) {
  auto& st = self->state;
  auto p = pending_step(st);
  if (!p)
    return;
  write_due_checkpoint(self, *p);
  auto waiting = std::move(st.agg.deferred_requests);
  st.agg.deferred_requests.clear();
  for (auto& [from, r] : waiting) // a joiner has no stage yet: not among `peers`, only not gone
    if (st.gone.count(from) == 0)
      serve_state(self, from, r);
}

// --- state download (joiners and repairs) ----------------------------------------

// Asks `from` for the stage state and watches the transfer: a request or chunks lost on a
// connection going down, or a source that died, must not leave this replica waiting forever.
void ask_state(self_ptr self, const state_source& from) {
  auto& st = self->state;
  auto id = (static_cast<std::uint64_t>(std::hash<std::string>{}(me(st))) << 16) + (++st.fetch.transfers);
  st.fetch.download.start(from.host, id, from.checkpoint);
  wire::state_request r{id, static_cast<std::uint32_t>(st.ctx->stage)};
  if (from.checkpoint) {
    r.checkpoint = true;
    r.iteration = *st.fetch.copy_iteration;
  }
  st.ctx->send(self, from.host, service::stage, r);
  self->delayed_send(self, std::chrono::milliseconds(st.ctx->spec->faults.connection_timeout_ms), timeout_atom::value,
                     id, std::uint64_t{0});
}

// Downloads from a live replica of the stage, else (resuming without a checkpoint of its own)
// the checkpoint another host keeps: the source after the last one tried, so that a retry
// goes elsewhere. Once every source was asked, the next round waits a connection timeout:
// hosts without the state answer at once, and that must not become a busy loop.
void request_state(self_ptr self, bool fresh_round) {
  auto& st = self->state;
  if (st.ready || st.fetch.download.active() || (st.fetch.fetch_armed && !fresh_round))
    return;
  std::vector<std::string> others;
  if (st.fetch.copy_iteration)
    for (auto& [id, stage] : st.peers)
      if (stage >= 0 && stage != st.ctx->stage && st.gone.count(id) == 0)
        others.push_back(id);
  state_source last;
  if (!fresh_round)
    last = {st.fetch.download.source(), st.fetch.download.checkpoint()};
  auto next = choose_state_source(same_stage(st), others, st.fetch.copy_iteration.has_value(), last);
  if (!next)
    return; // peer_up asks again when one comes
  if (next->wrapped) {
    st.fetch.fetch_armed = true;
    self->delayed_send(self, std::chrono::milliseconds(st.ctx->spec->faults.connection_timeout_ms), fetch_atom::value);
    return;
  }
  ask_state(self, next->source);
}

// The download watchdog: a transfer that received nothing for a connection timeout is asked
// again from the next replica.
void on_transfer_timeout(self_ptr self, std::uint64_t transfer, std::uint64_t had) {
  auto& st = self->state;
  if (st.ready || st.fetch.download.transfer() != transfer) // an inactive download has transfer 0
    return;
  auto have = st.fetch.download.received();
  if (have > had) { // progressing: keep watching
    self->delayed_send(self, std::chrono::milliseconds(st.ctx->spec->faults.connection_timeout_ms),
                       timeout_atom::value, transfer, have);
    return;
  }
  report_failure(self, "state download from " + st.fetch.download.source() + " stalled at " + std::to_string(have)
                         + " bytes; asking again");
  st.fetch.download.cancel();
  request_state(self);
}

// Downloads the stage state from `from` (any replica if empty). `withdraw`: stop being a
// replica meanwhile (diverged weights); a replica that is only behind stays one, so the
// others wait for its share instead of finishing the iteration without it.
void enter_download(self_ptr self, const std::string& from, bool withdraw) {
  auto& st = self->state;
  st.ready = false;
  st.fetch.download.cancel();
  if (withdraw)
    self->send(st.supervisor, stage_atom::value, std::int32_t{-1});
  if (!from.empty())
    ask_state(self, {from, false});
  else
    request_state(self);
}

boundary on_state_chunk(self_ptr self, const std::string& from, const wire::state_chunk& c) {
  auto& st = self->state;
  if (st.ready)
    return boundary::none;
  auto limit = largest_state_bytes(*st.ctx->spec);
  auto got = st.fetch.download.chunk(from, c, static_cast<std::uint32_t>(st.ctx->stage), limit);
  if (got == state_download::outcome::refused)
    report_failure(self, "state from " + from + " announces " + std::to_string(c.total_bytes) + " bytes (limit "
                           + std::to_string(limit) + ")");
  if (got == state_download::outcome::declined) { // it has none: the next source
    request_state(self);
    return boundary::none;
  }
  if (got != state_download::outcome::complete)
    return boundary::none;
  bool copy = st.fetch.download.checkpoint();
  auto what = copy ? "the checkpoint of iteration " + std::to_string(*st.fetch.copy_iteration) + " that " + from + " keeps"
                   : "state from " + from;
  auto blob = st.fetch.download.take();
  std::optional<model::pending_update> pending;
  auto r = st.model->import_state(blob.data(), blob.size(), &pending);
  if (!value_or_report(self, r, what)) {
    request_state(self);
    return boundary::none;
  }
  if (copy && static_cast<std::uint64_t>(st.model->steps()) + (pending ? 1 : 0) != *st.fetch.copy_iteration) {
    report_failure(self, what + ": its state holds " + std::to_string(st.model->steps()) + " steps; asking elsewhere");
    request_state(self);
    return boundary::none;
  }
  if (pending && !overlapped(st)) {
    report_failure(self, what + ": it carries a pending step (training.averaging overlap); this run averages sync");
    request_state(self);
    return boundary::none;
  }
  st.ready = true;
  st.agg.fresh = true;
  st.current = static_cast<std::uint64_t>(st.model->steps());
  // import_state discarded the gradients and stashes computed with the replaced weights; the
  // hops they belong to go too. They are of an iteration the peers applied (behind), or the
  // peers re-sent them when this replica withdrew (diverged).
  st.stash.arrived_ms.clear();
  st.agg.shared_ms.clear();
  for (auto k : st.ledger->finish(std::numeric_limits<std::uint64_t>::max())) {
    st.stash.forget(k);
  }
  swarm_forget(st, std::numeric_limits<std::uint64_t>::max());
  report_in_flight(self);
  st.stash.stalled.clear();
  st.agg.shared.clear();
  st.agg.averaged.clear();
  st.agg.my_norm.clear();
  st.agg.last_share.reset();
  st.agg.residual.clear();
  st.agg.next_residual.clear();
  install_pending(st, std::move(pending)); // overlap: `current` is the iteration after it
  st.agg.bfly.erase(st.agg.bfly.begin(), st.agg.bfly.lower_bound(st.current));
  for (auto& [i, b] : st.agg.bfly) // a round it was in before the load: whole shares from here on
    if (b.round) {
      b.round.reset();
      b.whole = true;
      drop_parts(st, i);
    }
  // Shares that arrived during the download for iterations the loaded state already holds
  // (a catch-up sends the one just applied too) are of no use; those of the iteration in
  // progress are kept.
  st.agg.shares.erase(st.agg.shares.begin(), st.agg.shares.lower_bound(st.current));
  if (st.agg.incoming)
    st.agg.incoming->forget_before(st.current);
  auto bytes = static_cast<std::uint64_t>(blob.size());
  self->send(st.supervisor, stage_atom::value, static_cast<std::int32_t>(st.ctx->stage));
  if (copy) { // a resume, not a join: at the iteration every host resumes at
    st.fetch.copy_iteration.reset();
    st.first_iteration = st.current;
    tell(self, st.ctx->reporter, loaded_atom::value, me(st), static_cast<std::uint32_t>(st.ctx->stage),
         static_cast<std::uint64_t>(st.current), st.model->weights_hash(),
         what + " (fetched over the wire, " + std::to_string(bytes) + " bytes)");
  } else {
    tell(self, st.ctx->reporter, joined_atom::value, me(st), static_cast<std::uint64_t>(st.current), bytes);
  }
  return boundary::loaded;
}

// A replica that loaded a state while the others moved on misses the shares, reports and
// norms they sent before they knew it: it loads the state again from a replica that is ahead.
// It stays a replica meanwhile; nobody waits for it unless it carries microbatches.
void behind(self_ptr self, const std::string& from, std::uint64_t their_iteration) {
  auto& st = self->state;
  tell(self, st.ctx->reporter, reload_atom::value, me(st),
       "behind replica " + from + " (at iteration " + std::to_string(st.current) + ", " + from + " at "
         + std::to_string(their_iteration) + "); loading its state again");
  enter_download(self, from, false);
}

// A relay that started again without --resume or --join while the cluster trained on (a
// container restarted with the same arguments) holds the seed's weights at iteration 0. With
// a live replica of its stage it is only behind (above); as the stage's only host nobody can
// bring it up to date, and it must not pass for the stage: it withdraws (no stage), so that
// the stage counts as lost and, in node mode with checkpoints, the hosts restore it, this
// stage-less host first in line to take it. Its signal: a norm or a holder's report of an
// iteration past its own, which no host can have reached without its stage's only replica.
bool stranded(self_ptr self, const std::string& from, std::uint64_t their_iteration) {
  auto& st = self->state;
  if (!st.ready || is_holder(st) || their_iteration <= st.current || !same_stage(st).empty())
    return false;
  report_failure(self, "stranded: " + from + " is at iteration " + std::to_string(their_iteration)
                         + ", this host at " + std::to_string(st.current) + ", and no other live host serves stage "
                         + std::to_string(st.ctx->stage) + ": these weights are not the cluster's (started again "
                         + "without --resume or --join?); withdrawing from the stage"
                         + (st.ctx->spec->self_restore ? ", which the hosts restore from the checkpoints"
                                                       : "; without checkpoints it cannot be restored"));
  st.ready = false;
  st.stash.pending.clear();
  self->send(st.supervisor, stage_atom::value, std::int32_t{-1});
  return true;
}

// The step verification of iteration i, once this replica's hash and every other replica's
// are in; true when this replica diverged (it is downloading the majority's state now).
bool check_vote(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.ready)
    return false;
  auto v = st.agg.vote.decide(i, me(st), same_stage(st).size());
  if (!v || !v->diverged)
    return false;
  report_failure(self, "weights diverged from replica " + v->source + " after iteration " + std::to_string(i)
                         + "; downloading its state");
  // A data holder stays one (its hello must say stage 0); a relay withdraws meanwhile.
  enter_download(self, v->source, !is_holder(st));
  return true;
}

void on_replica_hash(self_ptr self, const std::string& from, const wire::replica_hash& h) {
  auto& st = self->state;
  if (h.stage != static_cast<std::uint32_t>(st.ctx->stage))
    return;
  // A replica that applied an iteration beyond the one this replica is in has left it
  // behind for good (it applied `current` without this replica's share, or this one missed
  // the step): load its state. A freshly loaded state is behind as soon as a peer applied
  // the iteration it is in.
  if (st.ready && (h.iteration > st.current || (st.agg.fresh && h.iteration >= st.current))) {
    behind(self, from, h.iteration);
    return;
  }
  st.agg.vote.theirs(h.iteration, from, h.hash);
  check_vote(self, h.iteration);
}

// --- stall report -----------------------------------------------------------------

// An iteration still in progress after four hop timeouts is reported with what this replica
// still waits for (the operator's first question; the recovery paths have timeouts of their
// own). Re-armed for as long as the actor lives.
void stall_watch(self_ptr self, std::uint64_t seen) {
  auto& st = self->state;
  auto period = std::chrono::milliseconds(4 * st.ctx->spec->faults.hop_timeout_ms);
  self->delayed_send(self, period, tick_atom::value, st.current);
  if (seen != st.current || st.current >= st.ctx->spec->end_iteration())
    return;
  // A butterfly round that heard nothing for a whole period since it shared falls back to
  // whole shares (what it waits for may never come: an owner that counts otherwise). A round
  // that still receives chunks is slow, not stuck: large shares on slow uplinks take long.
  for (auto i = oldest_open(st); i <= st.current; ++i) // overlap: the round of the iteration before too
    if (auto b = st.agg.bfly.find(i);
        st.ready && b != st.agg.bfly.end() && b->second.round && st.agg.averaged.count(i) == 0) {
      auto shared = st.agg.shared_ms.find(i);
      if (shared != st.agg.shared_ms.end()
          && steady_ms() - std::max(shared->second, b->second.heard_ms) >= period.count()) {
        enter_whole(self, i, "nothing of its round for " + std::to_string(period.count()) + " ms");
        resume(self, try_average(self, i));
      }
    }
  if (!st.ready) {
    report_failure(self, "iteration " + std::to_string(st.current) + " in progress for over "
                           + std::to_string(period.count()) + " ms: no weights"
                           + (st.fetch.download.active() ? ", downloading them from " + st.fetch.download.source() : std::string{}));
    return;
  }
  std::int64_t counted = 0;
  if (auto sh = st.agg.shares.find(st.current); sh != st.agg.shares.end())
    for (auto& [r, d] : sh->second)
      counted += d.count;
  auto missing = st.barrier->waiting_for(st.current, me(st), live_holders(st), counted, st.gone, !is_holder(st));
  if (is_holder(st) && st.holder.running)
    missing = std::to_string(st.ctx->spec->training.microbatches_per_holder - static_cast<std::int64_t>(st.holder.done_count))
              + " of its microbatches unfinished"
              + (missing.empty() ? "" : "; " + missing);
  // A whole stage gone (every replica dead): no ring can close until a host brings the
  // stage's state back. Said plainly: the operator's remedy is the checkpoints.
  if (is_holder(st)) {
    std::string lost;
    for (int s = 1; s < stages(st); ++s)
      if (live_at(st, s).empty())
        lost += (lost.empty() ? "" : ", ") + std::to_string(s);
    if (!lost.empty())
      missing += (missing.empty() ? "" : "; ") + std::string{"no live replica of stage "} + lost
                 + ": no ring can close (a whole stage lost; with checkpoints, resume the cluster from its "
                   "newest cut: docs/checkpoints.md)";
  }
  if (!missing.empty())
    report_failure(self, "iteration " + std::to_string(st.current) + " in progress for over "
                           + std::to_string(period.count()) + " ms, waiting for " + missing);
  // Overlap: the iteration before, averaged while `current` computes, may be what holds the
  // boundary (its step comes there).
  if (auto p = oldest_open(st); p < st.current && st.agg.averaged.count(p) == 0 && st.agg.shared.count(p) > 0) {
    std::int64_t in = 0;
    if (auto sh = st.agg.shares.find(p); sh != st.agg.shares.end())
      for (auto& [r, d] : sh->second)
        in += d.count;
    auto waits = st.barrier->waiting_for(p, me(st), live_holders(st), in, st.gone, !is_holder(st));
    if (!waits.empty())
      report_failure(self, "iteration " + std::to_string(p) + " (averaged while " + std::to_string(st.current)
                             + " computes) waiting for " + waits);
  } else if (p < st.current && st.agg.averaged.count(p) > 0 && !norm_of(st, p)) {
    report_failure(self, "iteration " + std::to_string(p) + " (averaged while " + std::to_string(st.current)
                           + " computes) waiting for the norms of every stage");
  }
}

} // namespace gwtf::actors::compute
