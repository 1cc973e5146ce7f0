// GroupedRouting: the parameters of DeepSeek's mixture-of-experts router,
// plain numbers shared by the host backends and the CUDA kernels.
#pragma once

#include <cstdint>

namespace folio {

// DeepSeek's router (Backend::moe_route_grouped). Each expert has a score
// s: sigmoid(logit) (V3) or the softmax over all experts (V2), and a choice
// score s + selection_bias (V3's correction bias; none: s). The experts form
// num_groups equal consecutive groups, each scored by its best choice score
// (V2) or the sum of its best two (group_top2, V3); the groups_used best
// groups are kept (ties: the lower group) and the top-k of their experts by
// choice score chosen. A chosen expert weighs s, divided by the sum over the
// k when normalize, then times scale (routed_scaling_factor).
struct GroupedRouting {
  bool sigmoid = false;
  std::int64_t num_groups = 1;
  std::int64_t groups_used = 1;
  bool group_top2 = false;
  bool normalize = false;
  float scale = 1.0f;
};

}  // namespace folio
