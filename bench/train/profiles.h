// Gradient profiles for braid-train-bench: the tensors of a model in the order backward produces
// their gradients, and how backward compute time is spread between them.
//
// Built from the published parameter shapes (torchvision resnet50; HuggingFace bert-base-uncased
// and gpt2), not from a trace. Compute is split by a FLOP proxy: for a weight, its element count
// × the positions it is applied at (output pixels for a convolution, tokens for a linear layer);
// for a bias or norm vector, elements × positions; for an embedding, width × tokens (a scatter);
// plus the parameter-free work that sits between gradients (attention score matmuls, the tied
// GPT-2 LM head). The proxy fixes the *shape* of the timeline; the total backward time is a
// command-line choice (defaults in braid-train-bench --help), not a measurement.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace braid::bench {

struct ProfileEntry {
  std::string name;   ///< tensor name, or the parameter-free work it stands for
  size_t elements;    ///< 0 for compute-only entries
  double work;        ///< FLOP proxy of the backward work that precedes this gradient
  /// Matrix view for codecs (PowerSGD): rows × elements/rows, as the framework stores the
  /// weight (conv: out channels × in·kh·kw; linear: its first dimension); 0 = 1-D.
  size_t rows = 0;
};

struct Profile {
  std::string name;
  std::vector<ProfileEntry> backward;  ///< in the order backward runs
  size_t tensors() const;
  size_t elements() const;
  double work() const;
};

/// "resnet50", "bert-base", "gpt2-small"; or a file (one "name elements work [rows]" line per
/// entry, in backward order, '#' comments). Empty profile name on error (message in *error).
Profile loadProfile(const std::string& nameOrPath, std::string* error);
std::vector<std::string> builtinProfiles();

}  // namespace braid::bench
