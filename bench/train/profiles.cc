// Built-in gradient profiles; see profiles.h for how they are derived.
#include "bench/train/profiles.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace braid::bench {

size_t Profile::tensors() const {
  size_t n = 0;
  for (const ProfileEntry& e : backward) n += e.elements > 0 ? 1 : 0;
  return n;
}
size_t Profile::elements() const {
  size_t n = 0;
  for (const ProfileEntry& e : backward) n += e.elements;
  return n;
}
double Profile::work() const {
  double w = 0;
  for (const ProfileEntry& e : backward) w += e.work;
  return w;
}

namespace {

// Forward order is collected, then reversed: backward produces the last layer's gradients first.
struct Builder {
  std::vector<ProfileEntry> fwd;
  void add(const std::string& name, size_t elements, double positions, size_t rows = 0) {
    fwd.push_back({name, elements, static_cast<double>(elements) * positions, rows});
  }
  void work(const std::string& name, double w) { fwd.push_back({name, 0, w}); }
  std::vector<ProfileEntry> backward() const {
    std::vector<ProfileEntry> b(fwd.rbegin(), fwd.rend());
    return b;
  }
};

// torchvision resnet50 (v1.5: stride on the 3x3), 224x224 input: 161 tensors, 25,557,032
// parameters.
Profile resnet50() {
  Builder b;
  b.add("conv1.weight", 64 * 3 * 7 * 7, 112 * 112, 64);
  b.add("bn1.weight", 64, 112 * 112);
  b.add("bn1.bias", 64, 112 * 112);
  const int blocks[4] = {3, 4, 6, 3};
  const int width[4] = {64, 128, 256, 512};
  const int side[4] = {56, 28, 14, 7};
  int in = 64, prevSide = 56;
  for (int l = 0; l < 4; ++l) {
    const int w = width[l], out = 4 * w, s = side[l];
    for (int k = 0; k < blocks[l]; ++k) {
      const std::string p = "layer" + std::to_string(l + 1) + "." + std::to_string(k) + ".";
      const double s1 = k == 0 ? static_cast<double>(prevSide) * prevSide : s * s;
      b.add(p + "conv1.weight", static_cast<size_t>(w) * in, s1, w);
      b.add(p + "bn1.weight", w, s1);
      b.add(p + "bn1.bias", w, s1);
      b.add(p + "conv2.weight", static_cast<size_t>(w) * w * 9, s * s, w);
      b.add(p + "bn2.weight", w, s * s);
      b.add(p + "bn2.bias", w, s * s);
      b.add(p + "conv3.weight", static_cast<size_t>(out) * w, s * s, out);
      b.add(p + "bn3.weight", out, s * s);
      b.add(p + "bn3.bias", out, s * s);
      if (k == 0) {
        b.add(p + "downsample.0.weight", static_cast<size_t>(out) * in, s * s, out);
        b.add(p + "downsample.1.weight", out, s * s);
        b.add(p + "downsample.1.bias", out, s * s);
      }
      in = out;
    }
    prevSide = s;
  }
  b.add("fc.weight", 1000 * 2048, 1, 1000);
  b.add("fc.bias", 1000, 1);
  return {"resnet50", b.backward()};
}

// bert-base-uncased with the pooler, sequence 128: 199 tensors, 109,482,240 parameters.
Profile bertBase() {
  const double seq = 128;
  const size_t h = 768, ff = 3072;
  Builder b;
  b.add("embeddings.word_embeddings.weight", 30522 * h, 0, 30522);
  b.fwd.back().work = h * seq;  // backward of an embedding is a scatter of seq rows
  b.add("embeddings.position_embeddings.weight", 512 * h, 0, 512);
  b.fwd.back().work = h * seq;
  b.add("embeddings.token_type_embeddings.weight", 2 * h, 0, 2);
  b.fwd.back().work = h * seq;
  b.add("embeddings.LayerNorm.weight", h, seq);
  b.add("embeddings.LayerNorm.bias", h, seq);
  for (int l = 0; l < 12; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    for (const char* m : {"query", "key", "value"}) {
      b.add(p + "attention.self." + m + ".weight", h * h, seq, h);
      b.add(p + "attention.self." + m + ".bias", h, seq);
    }
    b.work(p + "attention.scores", 2.0 * seq * seq * h);  // QK^T and PV: no parameters
    b.add(p + "attention.output.dense.weight", h * h, seq, h);
    b.add(p + "attention.output.dense.bias", h, seq);
    b.add(p + "attention.output.LayerNorm.weight", h, seq);
    b.add(p + "attention.output.LayerNorm.bias", h, seq);
    b.add(p + "intermediate.dense.weight", ff * h, seq, ff);
    b.add(p + "intermediate.dense.bias", ff, seq);
    b.add(p + "output.dense.weight", h * ff, seq, h);
    b.add(p + "output.dense.bias", h, seq);
    b.add(p + "output.LayerNorm.weight", h, seq);
    b.add(p + "output.LayerNorm.bias", h, seq);
  }
  b.add("pooler.dense.weight", h * h, 1, h);
  b.add("pooler.dense.bias", h, 1);
  return {"bert-base", b.backward()};
}

// gpt2 (small), context 1024: 148 tensors, 124,439,808 parameters. wte is tied to the LM head:
// the head's backward runs first, but the shared gradient is final only after the embedding's
// backward, at the very end.
Profile gpt2Small() {
  const double seq = 1024;
  const size_t h = 768, vocab = 50257;
  Builder b;
  b.add("wpe.weight", 1024 * h, 0, 1024);
  b.fwd.back().work = h * seq;
  for (int l = 0; l < 12; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    b.add(p + "ln_1.weight", h, seq);
    b.add(p + "ln_1.bias", h, seq);
    b.add(p + "attn.c_attn.weight", h * 3 * h, seq, h);
    b.add(p + "attn.c_attn.bias", 3 * h, seq);
    b.work(p + "attn.scores", 2.0 * seq * seq * h / 2);  // causal: half the square
    b.add(p + "attn.c_proj.weight", h * h, seq, h);
    b.add(p + "attn.c_proj.bias", h, seq);
    b.add(p + "ln_2.weight", h, seq);
    b.add(p + "ln_2.bias", h, seq);
    b.add(p + "mlp.c_fc.weight", h * 4 * h, seq, h);
    b.add(p + "mlp.c_fc.bias", 4 * h, seq);
    b.add(p + "mlp.c_proj.weight", 4 * h * h, seq, 4 * h);
    b.add(p + "mlp.c_proj.bias", h, seq);
  }
  b.add("ln_f.weight", h, seq);
  b.add("ln_f.bias", h, seq);
  b.work("lm_head (tied to wte)", static_cast<double>(vocab) * h * seq);
  std::vector<ProfileEntry> bw = b.backward();
  bw.push_back({"wte.weight", vocab * h, h * seq, vocab});
  return {"gpt2-small", bw};
}

}  // namespace

std::vector<std::string> builtinProfiles() { return {"resnet50", "bert-base", "gpt2-small"}; }

Profile loadProfile(const std::string& nameOrPath, std::string* error) {
  if (nameOrPath == "resnet50") return resnet50();
  if (nameOrPath == "bert-base") return bertBase();
  if (nameOrPath == "gpt2-small") return gpt2Small();
  std::ifstream in(nameOrPath);
  if (!in) {
    *error = "no built-in profile or readable file named '" + nameOrPath + "'";
    return {};
  }
  Profile p;
  p.name = nameOrPath.substr(nameOrPath.find_last_of('/') + 1);
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    ProfileEntry e;
    if (!(ss >> e.name >> e.elements >> e.work)) {
      *error = nameOrPath + ":" + std::to_string(lineNo) + ": expected 'name elements work [rows]'";
      return {};
    }
    if (!(ss >> e.rows) || e.rows == 0 || e.elements % e.rows != 0) e.rows = 0;
    p.backward.push_back(e);
  }
  return p;
}

}  // namespace braid::bench
