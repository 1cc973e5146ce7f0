#include "engine/engine_stats.h"

namespace folio {

void StepCounts::move_into(EngineStats& stats) {
  stats.prompt_tokens += prompt_tokens;
  stats.computed_prompt_tokens += computed_prompt_tokens;
  stats.generation_tokens += generation_tokens;
  stats.num_requests_finished += num_requests_finished;
  stats.num_steps += num_steps;
  stats.spec_proposed_tokens += spec_proposed_tokens;
  stats.spec_accepted_tokens += spec_accepted_tokens;
  stats.spec_steps += spec_steps;
  stats.constraint_masks += constraint_masks;
  stats.constraint_mask_seconds += constraint_mask_seconds;
  for (double s : time_to_first_token) stats.time_to_first_token.observe(s);
  for (double s : inter_token_latency) stats.inter_token_latency.observe(s);
  for (double s : e2e_latency) stats.e2e_latency.observe(s);
  for (double s : queue_time) stats.queue_time.observe(s);
  // Zero again, keeping the vectors' room for the next turn.
  prompt_tokens = computed_prompt_tokens = generation_tokens = num_requests_finished = num_steps = 0;
  spec_proposed_tokens = spec_accepted_tokens = spec_steps = constraint_masks = 0;
  constraint_mask_seconds = 0.0;
  time_to_first_token.clear();
  inter_token_latency.clear();
  e2e_latency.clear();
  queue_time.clear();
}

}  // namespace folio
