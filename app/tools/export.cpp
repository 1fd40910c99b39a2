#include "app/tools/export.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/checkpoint_cut.hpp"
#include "app/tools/hf_layout.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/reference.hpp"
#include "model/stage.hpp"
#include "model/torch_runtime.hpp"
#include "app/config/derive.hpp"

namespace gwtf::app {

namespace {

namespace fs = std::filesystem;


struct loaded_model {
  std::uint64_t iteration = 0;
  std::map<std::string, torch::Tensor> params; // our global names
};

// Every stage's parameters at the cut, checked against the config (hash, shapes).
std::variant<loaded_model, std::string> load_cut(const cluster_config& cfg, const checkpoint_tool_options& opts,
                                                 std::ostream& out) {
  std::error_code ec;
  if (!fs::is_directory(opts.checkpoint, ec))
    return "--checkpoint: " + opts.checkpoint + " is not a directory";
  std::vector<std::string> notes;
  auto cut = model::find_cut(model::roots_under(opts.checkpoint, cfg.model.stages), checkpoint_hash(cfg), opts.iteration, notes);
  for (auto& n : notes)
    out << "# checkpoint passed over: " << n << "\n";
  if (auto* e = std::get_if<std::string>(&cut))
    return *e + " under " + opts.checkpoint + " (its HOST/stage-S/ directories)";
  auto& c = std::get<model::checkpoint_cut>(cut);
  loaded_model m;
  m.iteration = c.iteration;
  for (int s = 0; s < cfg.model.stages; ++s) {
    auto file = model::read_checkpoint(c.files[static_cast<std::size_t>(s)], static_cast<std::uint32_t>(s),
                                       checkpoint_hash(cfg));
    if (auto* e = std::get_if<std::string>(&file))
      return *e;
    auto& cp = std::get<model::checkpoint>(file);
    model::stage st{cfg.model, cfg.training, s};
    auto r = st.import_state(cp.state.data(), cp.state.size());
    if (auto* e = std::get_if<std::string>(&r))
      return c.files[static_cast<std::size_t>(s)] + ": " + *e;
    for (auto& p : st.parameters())
      m.params[p.name] = p.tensor.detach().clone().contiguous();
    out << "# stage " << s << ": " << c.files[static_cast<std::size_t>(s)] << "\n";
  }
  return m;
}

std::string write_file(const fs::path& path, const std::string& bytes) {
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f{tmp, std::ios::binary};
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f)
      return "cannot write " + tmp.string();
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return ec ? "cannot rename " + tmp.string() + ": " + ec.message() : std::string{};
}

std::variant<std::string, std::string> read_text(const fs::path& p) {
  std::ifstream f{p, std::ios::binary};
  if (!f)
    return std::variant<std::string, std::string>{std::in_place_index<1>, "cannot read " + p.string()};
  std::stringstream s;
  s << f.rdbuf();
  return std::variant<std::string, std::string>{std::in_place_index<0>, s.str()};
}

// A safetensors tensor as fp32.
torch::Tensor to_float(const safetensors_entry& e, const std::uint8_t* data) {
  auto type = e.dtype == "F32" ? torch::kFloat32 : e.dtype == "F16" ? torch::kFloat16 : torch::kBFloat16;
  auto bytes = static_cast<std::int64_t>(e.end - e.begin);
  auto raw = torch::empty({bytes}, torch::kUInt8);
  std::memcpy(raw.data_ptr(), data + e.begin, static_cast<std::size_t>(bytes));
  return raw.view(type).reshape(e.shape).to(torch::kFloat32);
}

} // namespace

int run_import(const cluster_config& cfg, const checkpoint_tool_options& opts, std::ostream& out, std::ostream& err) {
  model::configure_torch(1);
  auto fail = [&](const std::string& why) {
    err << "caf-gwtf: import: " << why << "\n";
    return 1;
  };
  fs::path from{opts.from};
  auto config_text = read_text(from / "config.json");
  if (config_text.index() == 1)
    return fail(std::get<1>(config_text));
  auto check = check_hf_config(cfg.model, std::get<0>(config_text));
  for (auto& n : check.notes)
    out << "# note: " << n << "\n";
  if (!check.errors.empty()) {
    for (auto& e : check.errors)
      err << "caf-gwtf: import: " << (from / "config.json").string() << ": " << e << "\n";
    return 1;
  }
  auto weights_text = read_text(from / "model.safetensors");
  if (weights_text.index() == 1)
    return fail(std::get<1>(weights_text));
  auto& bytes = std::get<0>(weights_text);
  auto* base = reinterpret_cast<const std::uint8_t*>(bytes.data());
  auto index = parse_safetensors(base, bytes.size());
  if (auto* e = std::get_if<std::string>(&index))
    return fail((from / "model.safetensors").string() + ": " + *e);
  auto& tensors = std::get<safetensors_index>(index).tensors;
  auto* data = base + std::get<safetensors_index>(index).data_offset;
  // Our parameters, filled from their Hugging Face pieces.
  model::reference_model whole{cfg.model, cfg.training};
  std::map<std::string, torch::Tensor> ours;
  std::map<std::string, std::int64_t> covered; // rows filled per parameter
  for (auto& p : whole.parameters())
    ours[p.name] = torch::zeros_like(p.tensor);
  std::set<std::string> used;
  for (auto& t : hf_layout(cfg.model)) {
    auto name = t.name;
    if (tensors.count(name) == 0 && name == "lm_head.weight" && check.tied)
      name = cfg.model.arch == model::architecture::gpt ? "transformer.wte.weight" : "model.embed_tokens.weight";
    auto it = tensors.find(name);
    if (it == tensors.end())
      return fail((from / "model.safetensors").string() + ": no tensor " + t.name);
    used.insert(name);
    auto x = to_float(it->second, data);
    auto want = t.shape;
    if (t.name == "transformer.wpe.weight" && x.dim() == 2 && x.size(0) > want[0])
      x = x.narrow(0, 0, want[0]); // a longer position table (noted above)
    if (x.sizes().vec() != want) {
      std::string got, need;
      for (auto d : x.sizes())
        got += (got.empty() ? "" : ", ") + std::to_string(d);
      for (auto d : want)
        need += (need.empty() ? "" : ", ") + std::to_string(d);
      return fail(t.name + " has shape [" + got + "], the config's model needs [" + need + "]");
    }
    if (t.transpose)
      x = x.t();
    auto& target = ours.at(t.ours);
    auto rows = t.rows < 0 ? target.size(0) : t.rows;
    target.narrow(0, t.row_begin, rows).copy_(x);
    covered[t.ours] += rows;
  }
  for (auto& [name, tensor] : ours)
    if (covered[name] != tensor.size(0))
      return fail("nothing in " + from.string() + " fills our parameter " + name);
  for (auto& [name, e] : tensors)
    if (used.count(name) == 0 && name.find("attn.bias") == std::string::npos
        && name.find("attn.masked_bias") == std::string::npos && name.find("rotary_emb") == std::string::npos)
      out << "# note: tensor " << name << " is not used\n";
  // Every declared host's stage, at iteration 0.
  auto hosts = placed_hosts(cfg);
  std::size_t files = 0;
  for (int s = 0; s < cfg.model.stages; ++s) {
    model::stage st{cfg.model, cfg.training, s};
    {
      torch::NoGradGuard no_grad;
      for (auto& p : st.parameters())
        p.tensor.copy_(ours.at(p.name));
    }
    auto blob = st.export_state();
    for (auto& h : hosts)
      if ((h.role == actors::host_role::data_holder ? 0 : h.stage) == s) {
        auto& host = h.name;
        model::checkpoint_meta meta{static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(cfg.model.stages), 0,
                                    checkpoint_hash(cfg), host};
        auto why = model::write_checkpoint((fs::path{opts.checkpoint} / host).string(), meta, blob,
                                           cfg.training.checkpoint_keep);
        if (!why.empty())
          return fail(why);
        ++files;
      }
  }
  out << "imported " << from.string() << " (" << tensors.size() << " tensors) as " << files
      << " checkpoints of iteration 0 under " << opts.checkpoint << "; train from them with node.data_dir: "
      << opts.checkpoint << " and --resume\n";
  return 0;
}

int run_export(const cluster_config& cfg, const checkpoint_tool_options& opts, std::ostream& out, std::ostream& err) {
  model::configure_torch(1);
  auto loaded = load_cut(cfg, opts, out);
  if (auto* e = std::get_if<std::string>(&loaded)) {
    err << "caf-gwtf: export: " << *e << "\n";
    return 1;
  }
  auto& m = std::get<loaded_model>(loaded);
  // safetensors: u64 header size, the JSON header (padded to 8 bytes), the raw tensors.
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"caf_gwtf_iteration", std::to_string(m.iteration)}};
  std::vector<torch::Tensor> data;
  std::int64_t offset = 0;
  for (auto& t : hf_layout(cfg.model)) {
    auto it = m.params.find(t.ours);
    if (it == m.params.end()) {
      err << "caf-gwtf: export: no parameter " << t.ours << " in the checkpoints (for " << t.name << ")\n";
      return 1;
    }
    auto x = it->second;
    if (t.rows >= 0)
      x = x.narrow(0, t.row_begin, t.rows);
    if (t.transpose)
      x = x.t();
    x = x.contiguous().to(torch::kFloat32);
    if (x.sizes().vec() != t.shape) {
      err << "caf-gwtf: export: " << t.ours << " does not have the shape " << t.name << " needs\n";
      return 1;
    }
    auto bytes = x.numel() * static_cast<std::int64_t>(sizeof(float));
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(x);
  }
  auto text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  std::uint64_t n = text.size();
  std::memcpy(file.data(), &n, 8); // little-endian on every platform we build for
  file += text;
  file.reserve(file.size() + static_cast<std::size_t>(offset));
  for (auto& x : data)
    file.append(static_cast<const char*>(x.data_ptr()), static_cast<std::size_t>(x.numel()) * sizeof(float));
  std::error_code ec;
  fs::create_directories(opts.out, ec);
  if (ec) {
    err << "caf-gwtf: export: cannot create " << opts.out << ": " << ec.message() << "\n";
    return 1;
  }
  if (auto why = write_file(fs::path{opts.out} / "model.safetensors", file); !why.empty()) {
    err << "caf-gwtf: export: " << why << "\n";
    return 1;
  }
  if (auto why = write_file(fs::path{opts.out} / "config.json", hf_config_json(cfg.model)); !why.empty()) {
    err << "caf-gwtf: export: " << why << "\n";
    return 1;
  }
  out << "exported iteration " << m.iteration << " (" << (cfg.model.arch == model::architecture::gpt ? "GPT2LMHeadModel" : "LlamaForCausalLM")
      << ", " << data.size() << " tensors, " << offset << " bytes) to " << opts.out << "\n";
  return 0;
}

int run_eval(const cluster_config& cfg, const checkpoint_tool_options& opts, std::ostream& out, std::ostream& err) {
  model::configure_torch(1);
  auto loaded = load_cut(cfg, opts, out);
  if (auto* e = std::get_if<std::string>(&loaded)) {
    err << "caf-gwtf: eval: " << *e << "\n";
    return 1;
  }
  auto& m = std::get<loaded_model>(loaded);
  auto corpus = model::corpus::open(cfg.data, cfg.model.vocab, cfg.model.seq_len);
  if (auto* e = std::get_if<std::string>(&corpus)) {
    err << "caf-gwtf: eval: data.path: " << *e << "\n";
    return 1;
  }
  model::reference_model whole{cfg.model, cfg.training};
  {
    torch::NoGradGuard no_grad;
    for (auto& p : whole.parameters()) {
      auto it = m.params.find(p.name);
      if (it == m.params.end()) {
        err << "caf-gwtf: eval: no parameter " << p.name << " in the checkpoints\n";
        return 1;
      }
      p.tensor.copy_(it->second);
    }
  }
  constexpr std::uint32_t held_out_holder = 4095; // above every data holder's index
  nlohmann::json rows = nlohmann::json::array();
  double sum = 0;
  int batches = 4;
  for (int j = 0; j < batches; ++j) {
    model::microbatch_id id{0, held_out_holder, static_cast<std::uint32_t>(j)};
    auto tokens = model::sample(std::get<model::corpus>(corpus), cfg.training.seed, id, cfg.training.microbatch_size,
                                cfg.model.seq_len);
    sum += whole.accumulate(id.key(), tokens);
    for (int r = 0; r < tokens.rows; ++r)
      rows.push_back(std::vector<std::int32_t>(tokens.tokens.begin() + r * tokens.cols,
                                               tokens.tokens.begin() + (r + 1) * tokens.cols));
  }
  double loss = sum / batches;
  char text[64];
  std::snprintf(text, sizeof text, "%.8f", loss);
  out << "eval: iteration " << m.iteration << ", held-out loss " << text << " over " << rows.size()
      << " sequences of " << cfg.model.seq_len << " tokens\n";
  if (!opts.batch_out.empty()) {
    nlohmann::json j{{"iteration", m.iteration}, {"loss", loss}, {"sequences", rows}};
    if (auto why = write_file(opts.batch_out, j.dump() + "\n"); !why.empty()) {
      err << "caf-gwtf: eval: " << why << "\n";
      return 1;
    }
  }
  return 0;
}

} // namespace gwtf::app
