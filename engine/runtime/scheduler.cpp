// Scheduler: the engine loop thread — drain, plan_step, one batched forward, sample, stop, stream.
#include "engine/runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/check.h"
#include "engine/runtime/batch.h"
#include "engine/runtime/kv_cache.h"
#include "engine/runtime/logprobs.h"
#include "engine/runtime/paged_kv_cache.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/scheduler_policy.h"
#include "engine/runtime/stop_conditions.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::runtime {

namespace {
constexpr auto kIdleWait = std::chrono::milliseconds(50);
}  // namespace

// One accepted request's state, owned by the loop.
struct Scheduler::Sequence {
  SeqId id = 0;
  std::shared_ptr<RequestChannel> channel;
  std::vector<TokenId> tokens;  // prompt + generated
  int64_t prompt_tokens = 0;
  int64_t max_total_tokens = 0;
  int64_t computed = 0;  // tokens whose KV is in `cache`
  std::optional<Clock::time_point> deadline;
  std::optional<int64_t> logprobs;         // top alternatives per output token, when asked for
  std::optional<int64_t> prompt_logprobs;  // top alternatives per prompt token, when asked for
  std::vector<TokenLogprobs> prompt_lp;    // computed so far (entry j: prompt token j + 1)
  bool prompt_lp_sent = false;
  // Only while running; frees its blocks when reset. A PagedKvCache, wrapped in a
  // WindowedKvCache for a model with sliding-window layers.
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StopConditions> stop;
  std::unique_ptr<tokenizer::StreamingDetokenizer> detok;
  bool started = false;       // admitted at least once (RoutingObserver::on_started was called)
  int64_t cached_tokens = 0;  // prompt tokens the prefix cache served at the first admission
  int64_t index = 0;          // which of the request's n samples
  // Sample 0 of an n > 1 request until its first token: samples 1 .. forks_pending are forked
  // from it then (sharing its KV blocks), with these parameters.
  int64_t forks_pending = 0;
  std::shared_ptr<const SamplingParams> fork_sampling;

  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_tokens; }
  Usage usage() const { return Usage{prompt_tokens, generated(), cached_tokens}; }
};

// The loop's state; touched only by the scheduler thread.
class Scheduler::Loop {
 public:
  explicit Loop(Scheduler& s) : s_(s) {}

  void run() {
    while (true) {
      const bool stopping = s_.stop_requested_.load(std::memory_order_acquire);
      take_new(s_.queue_->drain());
      if (s_.drop_pending_.exchange(false, std::memory_order_acq_rel)) drop_cache();
      if (s_.failed_.load(std::memory_order_acquire) && !seqs_.empty()) fail_all(s_.failure());
      if (stopping && static_cast<StopMode>(s_.stop_mode_.load()) == StopMode::kAbort) {
        abort_all();
        return;
      }
      if (running_.empty() && waiting_.empty()) {
        publish_load();
        if (stopping) return;
        s_.queue_->wait_for_work(kIdleWait);
        continue;
      }
      step();
      publish_load();
    }
  }

  void publish_load() {
    s_.load_running_.store(static_cast<int64_t>(running_.size()), std::memory_order_relaxed);
    s_.load_waiting_.store(static_cast<int64_t>(waiting_.size()), std::memory_order_relaxed);
    s_.load_kv_used_.store(s_.allocator_.total_blocks() - s_.allocator_.free_blocks(),
                           std::memory_order_relaxed);
    s_.load_kv_cached_.store(s_.allocator_.cached_unreferenced_blocks(), std::memory_order_relaxed);
    s_.load_kv_evicted_.store(s_.allocator_.evictions(), std::memory_order_relaxed);
    if (waiting_.empty()) s_.load_waiting_uncached_.store(0, std::memory_order_relaxed);
    s_.heartbeat_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    s_.kv_events_.publish(s_.allocator_.take_events());
  }

  // Answers drop_prefix_cache: every unreferenced cached block becomes a plain free block.
  void drop_cache() {
    PrefixCacheDrop result;
    result.dropped_blocks = s_.allocator_.drop_unreferenced_cache();
    result.held_blocks = s_.allocator_.cached_blocks();
    s_.kv_events_.publish(s_.allocator_.take_events());  // before the caller hears it is done
    {
      std::lock_guard<std::mutex> lock(s_.drop_mu_);
      s_.drop_answered_ = s_.drop_requested_;
      s_.drop_result_ = result;
    }
    s_.drop_cv_.notify_all();
  }

  // Ends every sequence with kError and `reason` (the scheduler failed).
  void fail_all(const Status& reason) {
    std::vector<SeqId> ids;
    ids.reserve(seqs_.size());
    for (const auto& [id, seq] : seqs_) ids.push_back(id);
    for (SeqId id : ids) {
      Sequence& q = seqs_.at(id);
      StopDecision last = q.stop->abort();
      if (!last.text.empty()) {
        s_.queue_->push_tokens(*q.channel, {}, std::move(last.text), {}, q.index);
      }
      end(id, FinishReason::kError, reason);
    }
  }

  // Ends every sequence with kAbort (stop(kAbort), or never started).
  void abort_all() {
    for (SeqId id : running_) s_.allocator_.free_sequence(id);
    for (auto& [id, seq] : seqs_) finish_sample(seq, FinishReason::kAbort, Status());
    seqs_.clear();
    running_.clear();
    waiting_.clear();
  }

  void take_new(std::vector<AcceptedRequest> accepted) {
    // Sliding-window layers keep their KV in each sequence's own ring, which a fork cannot
    // share: there the n samples are independent sequences that each prefill the prompt.
    const bool forkable = s_.runner_->kv_layout().n_windowed() == 0;
    for (AcceptedRequest& a : accepted) {
      const Request& r = a.request;
      for (int64_t index = 0; index < (forkable ? 1 : r.n); ++index) {
        Sequence seq = new_sample(a.channel, r.prompt_token_ids, r.sampling, index, r.deadline);
        if (forkable && r.n > 1) {
          seq.forks_pending = r.n - 1;
          seq.fork_sampling = std::make_shared<const SamplingParams>(r.sampling);
        }
        waiting_.push_back(seq.id);
        seqs_.emplace(seq.id, std::move(seq));
      }
    }
  }

  // A new sequence for sample `index` of a request: its own sampler (seeded with seed + index
  // when a seed is given) and stop conditions over the prompt; sample 0 alone carries the
  // prompt's logprobs.
  Sequence new_sample(const std::shared_ptr<RequestChannel>& channel,
                      const std::vector<TokenId>& prompt, const SamplingParams& sampling,
                      int64_t index, std::optional<Clock::time_point> deadline) {
    Sequence seq;
    seq.id = next_id_++;
    seq.index = index;
    seq.channel = channel;
    seq.tokens = prompt;
    seq.prompt_tokens = static_cast<int64_t>(prompt.size());
    seq.max_total_tokens =
        seq.prompt_tokens +
        resolve_max_tokens(sampling.max_tokens, seq.prompt_tokens, s_.options_.limits);
    seq.deadline = deadline;
    seq.logprobs = sampling.logprobs;
    if (index == 0) seq.prompt_logprobs = sampling.prompt_logprobs;
    seq.prompt_lp_sent = !seq.prompt_logprobs.has_value();
    SamplingParams params = sampling;
    if (params.seed.has_value()) *params.seed += static_cast<uint64_t>(index);
    const auto& eos = s_.options_.eos_token_ids;
    seq.sampler =
        std::make_unique<Sampler>(params, static_cast<int32_t>(s_.runner_->n_vocab()), prompt, eos);
    seq.stop = std::make_unique<StopConditions>(params, eos, seq.prompt_tokens,
                                                s_.options_.limits.context_length);
    if (s_.options_.tokenizer != nullptr) {
      seq.detok = std::make_unique<tokenizer::StreamingDetokenizer>(*s_.options_.tokenizer);
    }
    return seq;
  }

  // The step's plan from the current sequences and KV state (fills the views and matches_).
  StepPlan make_plan() {
    running_view_.clear();
    for (SeqId id : running_) {
      const Sequence& q = seqs_.at(id);
      RunningSeq& view = running_view_.emplace_back();
      view.id = id;
      view.tokens = static_cast<int64_t>(q.tokens.size());
      view.computed_tokens = q.computed;
      // Blocks usable without a copy: a forked sample's shared partial last block is not.
      view.allocated_blocks =
          std::max<int64_t>(0, kv_blocks_for_tokens(view.tokens, s_.allocator_.block_tokens()) -
                                   s_.allocator_.blocks_needed(id, view.tokens));
      view.cancelled = q.channel->cancelled();
      view.deadline = q.deadline;
      view.releasable_blocks = s_.allocator_.sole_blocks(id);
    }
    waiting_view_.clear();
    matches_.clear();
    for (SeqId id : waiting_) {
      const Sequence& q = seqs_.at(id);
      WaitingSeq& view = waiting_view_.emplace_back();
      view.id = id;
      view.tokens = static_cast<int64_t>(q.tokens.size());
      view.max_total_tokens = q.max_total_tokens;
      view.cancelled = q.channel->cancelled();
      view.deadline = q.deadline;
      // Only the first max_running can be admitted this step: look up no further.
      if (static_cast<int64_t>(waiting_view_.size()) <= s_.options_.limits.max_running) {
        find_cached_prefix(q, waiting_view_.back());
      }
    }
    int64_t uncached = 0;
    for (const WaitingSeq& w : waiting_view_) uncached += w.tokens - w.cached_tokens;
    s_.load_waiting_uncached_.store(uncached, std::memory_order_relaxed);
    const SchedulerInput input{&running_view_, &waiting_view_, s_.allocator_.free_blocks(),
                               Clock::now()};
    return plan_step(input, s_.options_.limits, s_.budget_);
  }

  // A plan that admits a cached prefix held by a running sequence it also drops is planned
  // again after the drop: the drop counts those blocks as freed, yet adopting them takes them
  // off the free count again, which admit_blocks (made while they were held) did not charge.
  bool drops_what_it_adopts(const StepPlan& plan) const {
    const bool drops_running = std::any_of(plan.dropped.begin(), plan.dropped.end(),
                                           [](const DroppedSeq& d) { return d.was_running; });
    return drops_running && std::any_of(plan.admitted.begin(), plan.admitted.end(),
                                        [this](SeqId id) { return matches_.count(id) != 0; });
  }

  void end_dropped(const std::vector<DroppedSeq>& dropped) {
    for (const DroppedSeq& d : dropped) {
      Status error;
      if (d.reason == FinishReason::kDeadline) {
        error = deadline_exceeded_error("request deadline passed");
      } else if (d.reason == FinishReason::kError) {
        error = internal_error("request can never fit the KV budget");
      }
      // Release the text the stop conditions held back (a possible stop-string start).
      Sequence& q = seqs_.at(d.id);
      StopDecision last = q.stop->abort();
      if (!last.text.empty()) {
        s_.queue_->push_tokens(*q.channel, {}, std::move(last.text), {}, q.index);
      }
      end(d.id, d.reason, std::move(error));
    }
  }

  void step() {
    StepPlan plan = make_plan();
    // Each round ends the dropped sequences, so this ends.
    while (drops_what_it_adopts(plan)) {
      end_dropped(plan.dropped);
      plan = make_plan();
    }
    end_dropped(plan.dropped);
    for (auto it = plan.preempted.rbegin(); it != plan.preempted.rend(); ++it) {
      Sequence& q = seqs_.at(*it);
      s_.allocator_.free_sequence(q.id);
      q.cache.reset();  // recomputed from scratch on readmission
      q.computed = 0;
      s_.preemptions_.fetch_add(1, std::memory_order_relaxed);
      std::erase(running_, q.id);
      waiting_.push_front(q.id);
    }
    for (SeqId id : plan.admitted) {
      TANDEM_CHECK(!waiting_.empty() && waiting_.front() == id);
      waiting_.pop_front();
      running_.push_back(id);
      Sequence& q = seqs_.at(id);
      const int64_t cached = adopt_cached_prefix(q);
      q.cache = s_.runner_->wrap_kv_cache(
          std::make_unique<PagedKvCache>(*s_.pool_, s_.allocator_, q.id,
                                         static_cast<size_t>(q.max_total_tokens)),
          static_cast<size_t>(q.max_total_tokens));
      q.cache->set_length(static_cast<size_t>(cached));
      q.computed = cached;
      if (!q.started) {
        q.started = true;
        q.cached_tokens = std::min(cached, q.prompt_tokens);
        s_.prefix_query_tokens_.fetch_add(q.prompt_tokens, std::memory_order_relaxed);
        s_.prefix_hit_tokens_.fetch_add(q.cached_tokens, std::memory_order_relaxed);
        s_.queue_->set_cached_tokens(*q.channel, q.cached_tokens);
        if (s_.options_.routing_observer != nullptr && q.index == 0) {
          s_.options_.routing_observer->on_started(q.channel->id());
        }
      }
    }
    if (plan.work.empty()) {
      // Nothing could run (e.g. every running sequence was dropped); avoid spinning when idle.
      if (running_.empty() && !waiting_.empty() && plan.dropped.empty()) {
        s_.queue_->wait_for_work(kIdleWait);
      }
      return;
    }
    run_work(plan.work);
  }

  void run_work(const std::vector<ScheduledWork>& work) {
    inputs_.clear();
    for (const ScheduledWork& w : work) {
      Sequence& q = seqs_.at(w.id);
      TANDEM_CHECK(w.start == q.computed);
      // Takes the blocks plan_step reserved (and copies shared ones) from the pool.
      const Status grown =
          q.cache->prepare_write(static_cast<size_t>(w.start), static_cast<size_t>(w.kv_tokens));
      TANDEM_CHECK(grown.ok());
      SequenceInput in;
      in.cache = q.cache.get();
      in.tokens = std::span<const int32_t>(q.tokens).subspan(static_cast<size_t>(w.start),
                                                             static_cast<size_t>(w.num_tokens));
      in.start_pos = static_cast<size_t>(w.start);
      // prompt_logprobs need every row of the prompt's chunks (one logits row per position).
      const bool all_rows = !q.prompt_lp_sent && w.start < q.prompt_tokens;
      in.logits = all_rows    ? LogitsWanted::kAll
                  : w.samples ? LogitsWanted::kLast
                              : LogitsWanted::kNone;
      inputs_.push_back(in);
    }
    RoutingObserver* observer = s_.options_.routing_observer;
    const Status status =
        s_.runner_->forward(inputs_, out_, ForwardOptions{.record_routing = observer != nullptr});
    s_.steps_.fetch_add(1, std::memory_order_relaxed);
    if (!status.ok()) {
      // The batch's caches are undefined from the chunk on: fail its sequences.
      for (const ScheduledWork& w : work) end(w.id, FinishReason::kError, status);
      return;
    }
    if (s_.options_.weights_check) {
      Status weights = s_.options_.weights_check();
      if (!weights.ok()) {
        // The pass may have read changed (or zeroed) weights: nothing it computed is used.
        s_.fail(std::move(weights));
        fail_all(s_.failure());
        return;
      }
    }
    if (observer != nullptr) {
      routed_.clear();
      for (const ScheduledWork& w : work) {
        const RoutedToken owner{&seqs_.at(w.id).channel->id(), w.kind == WorkKind::kPrefill};
        routed_.insert(routed_.end(), static_cast<size_t>(w.num_tokens), owner);
      }
      observer->on_forward(out_.routing, routed_);
      observer->on_expert_seconds(out_.expert_seconds);
    }
    for (size_t i = 0; i < work.size(); ++i) {
      const ScheduledWork& w = work[i];
      Sequence& q = seqs_.at(w.id);
      q.computed += w.num_tokens;
      // The blocks this pass filled can serve later requests with the same prefix.
      s_.allocator_.commit(
          q.id, std::span<const TokenId>(q.tokens).first(static_cast<size_t>(q.computed)));
      collect_prompt_logprobs(q, w, i);
      if (!w.samples) continue;
      if (!q.prompt_lp_sent) {  // the prompt is complete: its logprobs go before its first token
        q.prompt_lp_sent = true;
        s_.queue_->push_prompt_logprobs(*q.channel, std::exchange(q.prompt_lp, {}));
      }
      const std::span<const float> last = out_.row(i, out_.n_rows[i] - 1);
      std::vector<SeqId> samplers{w.id};
      if (q.forks_pending > 0) fork_samples(w.id, samplers);  // may rehash seqs_: q is stale
      for (SeqId id : samplers) sample_and_emit(seqs_.at(id), last);
    }
    if (s_.options_.after_step) s_.options_.after_step(s_.steps_.load(std::memory_order_relaxed));
  }

  // Appends the prompt logprobs that batch entry `i`'s rows give: row r (position w.start + r)
  // predicts prompt token w.start + r + 1. A recompute after preemption covers rows already taken
  // (only the missing ones are added).
  void collect_prompt_logprobs(Sequence& q, const ScheduledWork& w, size_t i) {
    if (q.prompt_lp_sent || out_.n_rows[i] != static_cast<size_t>(w.num_tokens)) return;
    for (int64_t r = 0; r < w.num_tokens; ++r) {
      const int64_t next = w.start + r + 1;
      if (next >= q.prompt_tokens) break;
      if (static_cast<int64_t>(q.prompt_lp.size()) != next - 1) continue;
      q.prompt_lp.push_back(token_logprobs(out_.row(i, static_cast<size_t>(r)),
                                           q.tokens[static_cast<size_t>(next)],
                                           *q.prompt_logprobs));
    }
  }

  // Fills `view`'s cached_tokens and admit_blocks from the longest cached prefix of the sequence's
  // tokens, and keeps the match for its admission this step. The last token is always computed
  // (its logits give the next one), so a fully cached prompt reuses all but it, copying the last
  // block. A request for prompt_logprobs needs every prompt position's logits: no reuse until they
  // were sent.
  void find_cached_prefix(const Sequence& q, WaitingSeq& view) {
    if (!s_.allocator_.prefix_caching() || !q.prompt_lp_sent) return;
    PrefixMatch match = s_.allocator_.match_prefix(q.tokens);
    const auto total = static_cast<int64_t>(q.tokens.size());
    const int64_t bt = s_.allocator_.block_tokens();
    const int64_t cached = std::min(static_cast<int64_t>(match.blocks.size()) * bt, total - 1);
    if (cached <= 0) return;
    view.cached_tokens = cached;
    view.admit_blocks = kv_blocks_for_tokens(total, bt) -
                        static_cast<int64_t>(match.blocks.size()) + (cached % bt != 0 ? 1 : 0) +
                        match.unreferenced;
    matches_.emplace(q.id, CachedPrefix{std::move(match.blocks), cached});
  }

  // Admission: hands the sequence the cached blocks find_cached_prefix matched this step (still
  // cached: nothing was evicted since) and returns the tokens they cover (0 without a match).
  int64_t adopt_cached_prefix(const Sequence& q) {
    auto it = matches_.find(q.id);
    if (it == matches_.end()) return 0;
    const Status adopted = s_.allocator_.adopt_prefix(q.id, it->second.blocks, it->second.tokens);
    TANDEM_CHECK(adopted.ok());
    return it->second.tokens;
  }

  // Samples the sequence's next token from `last` and emits it (or ends the sequence).
  void sample_and_emit(Sequence& q, std::span<const float> last) {
    Result<int32_t> token = q.sampler->sample(last);
    if (!token.ok()) {
      end(q.id, FinishReason::kError, token.status());
      return;
    }
    std::vector<TokenLogprobs> logprobs;
    if (q.logprobs.has_value()) {
      logprobs.push_back(token_logprobs(last, token.value(), *q.logprobs));
    }
    emit(q, token.value(), std::move(logprobs));
  }

  // Sample 0 of an n > 1 request has its prompt's logits: samples 1 .. n - 1 become sequences of
  // their own that share all of its KV blocks (the partial last one is copied on their first
  // write), with their own sampler (seed + index) and stop conditions, and run from here on like
  // any other. Appends their ids to `out`, to sample from the same logits row.
  void fork_samples(SeqId parent_id, std::vector<SeqId>& out) {
    const int64_t forks = std::exchange(seqs_.at(parent_id).forks_pending, 0);
    for (int64_t index = 1; index <= forks; ++index) {
      const Sequence& p = seqs_.at(parent_id);
      const std::vector<TokenId> prompt(p.tokens.begin(), p.tokens.begin() + p.prompt_tokens);
      Sequence child = new_sample(p.channel, prompt, *p.fork_sampling, index, p.deadline);
      child.computed = p.computed;
      child.started = true;
      child.cached_tokens = p.cached_tokens;
      TANDEM_CHECK(s_.allocator_.fork(parent_id, child.id).ok());
      child.cache = s_.runner_->wrap_kv_cache(
          std::make_unique<PagedKvCache>(*s_.pool_, s_.allocator_, child.id,
                                         static_cast<size_t>(child.max_total_tokens)),
          static_cast<size_t>(child.max_total_tokens));
      child.cache->set_length(static_cast<size_t>(child.computed));
      running_.push_back(child.id);
      out.push_back(child.id);
      seqs_.emplace(child.id, std::move(child));
    }
    seqs_.at(parent_id).fork_sampling.reset();
  }

  // Pushes the final event of the sequence's sample, and of the samples still to be forked from
  // it (they end with it, having generated nothing); tells the routing observer once the
  // request's last sample ended.
  void finish_sample(Sequence& q, FinishReason reason, Status error, std::vector<TokenId> last = {},
                     StopMatch matched = {}, std::vector<TokenLogprobs> last_logprobs = {}) {
    for (int64_t index = 1; index <= q.forks_pending; ++index) {
      s_.queue_->finish(*q.channel, reason, Usage{q.prompt_tokens, 0, q.cached_tokens}, error, {},
                        {}, {}, index);
    }
    q.forks_pending = 0;
    s_.queue_->finish(*q.channel, reason, q.usage(), std::move(error), std::move(last),
                      std::move(matched), std::move(last_logprobs), q.index);
    if (s_.options_.routing_observer != nullptr && q.channel->finished()) {
      s_.options_.routing_observer->on_finished(q.channel->id());
    }
  }

  // Records a sampled token, feeds the stop conditions and streams it (or ends the sequence).
  // `logprobs`: the token's, when the request asked for them (else empty).
  void emit(Sequence& q, int32_t token, std::vector<TokenLogprobs> logprobs) {
    q.tokens.push_back(token);
    std::string piece;
    if (q.detok) {
      Result<std::string> text = q.detok->feed(token);
      if (text.ok()) piece = std::move(text).value();
    }
    StopDecision decision = q.stop->feed(token, piece);
    if (!decision.finished) {
      s_.queue_->push_tokens(*q.channel, {token}, std::move(decision.text), std::move(logprobs),
                             q.index);
      return;
    }
    if (decision.reason == FinishReason::kLength && q.detok) {
      decision.text += q.detok->flush();  // an unfinished UTF-8 character becomes U+FFFD
    }
    if (!decision.text.empty()) {
      s_.queue_->push_tokens(*q.channel, {}, std::move(decision.text), {}, q.index);
    }
    end(q.id, decision.reason, Status(), {token},
        StopMatch{decision.matched_token_id, std::move(decision.matched_stop_string)},
        std::move(logprobs));
  }

  // Pushes the final event, frees the KV blocks and forgets the sequence.
  void end(SeqId id, FinishReason reason, Status error, std::vector<TokenId> last = {},
           StopMatch matched = {}, std::vector<TokenLogprobs> last_logprobs = {}) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return;
    Sequence& q = it->second;
    s_.allocator_.free_sequence(id);
    finish_sample(q, reason, std::move(error), std::move(last), std::move(matched),
                  std::move(last_logprobs));
    std::erase(running_, id);
    std::erase(waiting_, id);
    seqs_.erase(it);
  }

 private:
  Scheduler& s_;
  SeqId next_id_ = 1;
  std::unordered_map<SeqId, Sequence> seqs_;
  std::vector<SeqId> running_;  // admission order
  std::deque<SeqId> waiting_;   // queue order
  std::vector<RunningSeq> running_view_;
  std::vector<WaitingSeq> waiting_view_;
  std::vector<SequenceInput> inputs_;
  std::vector<RoutedToken> routed_;
  ForwardOutput out_;
  struct CachedPrefix {
    std::vector<BlockId> blocks;
    int64_t tokens = 0;
  };
  std::unordered_map<SeqId, CachedPrefix> matches_;  // this step's waiting sequences with a hit
};

Scheduler::Scheduler(std::unique_ptr<ModelRunner> runner, SchedulerOptions options,
                     KvBlockAllocator allocator, std::unique_ptr<KvPool> pool)
    : runner_(std::move(runner)),
      options_(std::move(options)),
      allocator_(std::move(allocator)),
      pool_(std::move(pool)) {
  budget_ = KvBudget{allocator_.total_blocks(), allocator_.block_tokens()};
  allocator_.set_events(true);
  queue_ = std::make_unique<RequestQueue>(options_.queue_capacity,
                                          [this](const Request& r) { return validate(r); });
  loop_ = std::make_unique<Loop>(*this);
}

int64_t window_rings_budget_bytes(const KvLayerLayout& layout, size_t kv_dim,
                                  const SchedulerLimits& limits) {
  if (layout.n_windowed() == 0) return 0;
  const auto ring = static_cast<int64_t>(window_ring_bytes(
      layout, kv_dim, static_cast<size_t>(limits.prefill_chunk_tokens), kWindowRingBlockRows));
  return std::max<int64_t>(limits.max_running, 1) * ring;
}

DeviceWindowRings device_window_rings(const KvLayerLayout& layout, const SchedulerLimits& limits,
                                      size_t block_tokens) {
  if (layout.n_windowed() == 0 || layout.n_full == 0 || block_tokens == 0) return {};
  DeviceWindowRings rings;
  rings.slots = static_cast<size_t>(std::max<int64_t>(limits.max_running, 1));
  rings.pass_tokens = static_cast<size_t>(std::max<int64_t>(limits.prefill_chunk_tokens, 1));
  rings.blocks = device_window_ring_blocks(layout.window, rings.pass_tokens, block_tokens);
  return rings;
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(std::unique_ptr<ModelRunner> runner,
                                                     SchedulerOptions options) {
  if (runner == nullptr) return invalid_argument_error("scheduler needs a model runner");
  if (options.queue_capacity < 1) return invalid_argument_error("queue_capacity must be >= 1");
  if (options.limits.context_length > static_cast<int64_t>(runner->context_length())) {
    return invalid_argument_error(
        "context_length " + std::to_string(options.limits.context_length) +
        " exceeds the model's " + std::to_string(runner->context_length()));
  }
  if (options.kv_block_tokens < 1) return invalid_argument_error("kv_block_tokens must be >= 1");
  // The pool holds the full-attention layers; sliding-window layers keep their window in each
  // sequence's own ring (WindowedKvCache), outside the pool.
  const KvLayerLayout& layout = runner->kv_layout();
  if (layout.n_full == 0) {
    return unimplemented_error(
        "a model whose every layer is windowed has no layers for the KV pool");
  }
  const size_t kv_dim = static_cast<size_t>(runner->spec().kv_dim());
  const bool keys_only = runner->spec().kv_value_dim() == 0;  // MLA: the latent row only
  TANDEM_ASSIGN_OR_RETURN(
      const int64_t per_token,
      kv_bytes_per_token(static_cast<int64_t>(layout.n_full), 1, static_cast<int64_t>(kv_dim),
                         static_cast<int64_t>(kernels::kv_type_bytes(layout.type)), keys_only));
  KvBlockConfig kv;
  kv.block_tokens = options.kv_block_tokens;
  kv.bytes_per_token = per_token;
  if (options.kv_blocks > 0) {
    kv.budget_bytes = options.kv_blocks * options.kv_block_tokens * per_token;
  } else if (options.kv_budget_bytes > 0) {
    // The windowed layers' rings of max_running sequences come out of the same budget.
    const int64_t rings = window_rings_budget_bytes(layout, kv_dim, options.limits);
    kv.budget_bytes = options.kv_budget_bytes - rings;
    if (kv.budget_bytes <= 0) {
      return invalid_argument_error("the KV budget of " + std::to_string(options.kv_budget_bytes) +
                                    " bytes does not cover the sliding-window rings of " +
                                    std::to_string(options.limits.max_running) +
                                    " running sequences (" + std::to_string(rings) +
                                    " bytes in all)");
    }
  } else {
    kv.budget_bytes = std::max<int64_t>(options.limits.max_running, 1) *
                      kv_blocks_for_tokens(options.limits.context_length, kv.block_tokens) *
                      kv.block_tokens * per_token;
  }
  // The windowed layers' rings are private to each sequence, so a cached prefix could not restore
  // them: prefix caching covers models whose every layer keeps its KV in the pool.
  kv.prefix_caching = options.prefix_caching && layout.n_windowed() == 0;
  TANDEM_ASSIGN_OR_RETURN(KvBlockAllocator allocator, KvBlockAllocator::create(kv));
  // The whole budget's KV memory, once: every running sequence's cache lives in it.
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<KvPool> pool,
      KvPool::create(layout.n_full, kv_dim, static_cast<size_t>(allocator.block_tokens()),
                     static_cast<size_t>(allocator.total_blocks()), keys_only, layout.type));
  TANDEM_RETURN_IF_ERROR(validate_scheduler_limits(
      options.limits, KvBudget{allocator.total_blocks(), allocator.block_tokens()}));
  if (options.eos_token_ids.empty() && runner->spec().eos_token_id.has_value()) {
    options.eos_token_ids.push_back(static_cast<int32_t>(*runner->spec().eos_token_id));
  }
  return std::unique_ptr<Scheduler>(
      new Scheduler(std::move(runner), std::move(options), std::move(allocator), std::move(pool)));
}

Scheduler::~Scheduler() {
  stop(StopMode::kAbort);
}

void Scheduler::close_admission() {
  queue_->close();
}

bool Scheduler::cancel(const std::string& id) {
  return queue_->cancel(id);
}

size_t Scheduler::in_flight() const {
  return queue_->in_flight();
}

SchedulerLoad Scheduler::load() const {
  SchedulerLoad load;
  load.running = load_running_.load(std::memory_order_relaxed);
  load.waiting = load_waiting_.load(std::memory_order_relaxed);
  load.kv_used_blocks = load_kv_used_.load(std::memory_order_relaxed);
  load.kv_total_blocks = budget_.total_blocks;
  load.kv_block_tokens = budget_.block_tokens;
  load.steps = steps_.load(std::memory_order_relaxed);
  load.preemptions = preemptions_.load(std::memory_order_relaxed);
  load.kv_cached_blocks = load_kv_cached_.load(std::memory_order_relaxed);
  load.kv_evicted_blocks = load_kv_evicted_.load(std::memory_order_relaxed);
  load.waiting_uncached_tokens = load_waiting_uncached_.load(std::memory_order_relaxed);
  load.prefix_query_tokens = prefix_query_tokens_.load(std::memory_order_relaxed);
  load.prefix_hit_tokens = prefix_hit_tokens_.load(std::memory_order_relaxed);
  load.heartbeat =
      Clock::time_point(Clock::duration(heartbeat_ns_.load(std::memory_order_relaxed)));
  return load;
}

Status Scheduler::start() {
  if (started_) return failed_precondition_error("scheduler already started");
  started_ = true;
  heartbeat_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  thread_ = std::thread([this] { loop_->run(); });
  loop_started_.store(true, std::memory_order_release);
  return Status();
}

void Scheduler::stop(StopMode mode) {
  if (stop_requested_.load(std::memory_order_acquire) && !thread_.joinable()) return;
  stop_mode_.store(static_cast<int>(mode));
  queue_->close();
  kv_events_.close();  // subscribers end; nothing more is published
  // After close(): the loop's next drain sees every accepted request.
  stop_requested_.store(true, std::memory_order_release);
  if (thread_.joinable()) {
    thread_.join();
  } else {
    // Never started: end whatever was accepted.
    loop_->take_new(queue_->drain());
    loop_->abort_all();
  }
}

Result<RequestHandle> Scheduler::submit(Request request) {
  if (failed_.load(std::memory_order_acquire)) {
    return unavailable_error("this server stopped serving its model: " + failure().message());
  }
  return queue_->submit(std::move(request));
}

void Scheduler::fail(Status reason) {
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    if (!failure_.ok()) return;
    failure_ = reason.ok() ? internal_error("scheduler failed") : std::move(reason);
  }
  failed_.store(true, std::memory_order_release);
  queue_->notify();
}

Result<PrefixCacheDrop> Scheduler::drop_prefix_cache(std::chrono::milliseconds wait) {
  if (!allocator_.prefix_caching()) {
    return failed_precondition_error(
        "the prefix cache is off (runtime.prefix_caching, or a model "
        "with sliding-window layers)");
  }
  if (!loop_started_.load(std::memory_order_acquire) ||
      stop_requested_.load(std::memory_order_acquire)) {
    return failed_precondition_error("the engine loop is not running");
  }
  std::unique_lock<std::mutex> lock(drop_mu_);
  const int64_t ticket = ++drop_requested_;
  drop_pending_.store(true, std::memory_order_release);
  queue_->notify();
  if (!drop_cv_.wait_for(lock, wait, [&] { return drop_answered_ >= ticket; })) {
    return deadline_exceeded_error("the engine loop did not drop the prefix cache within " +
                                   std::to_string(wait.count()) +
                                   " ms (a long forward pass); it "
                                   "will at its next step");
  }
  return drop_result_;
}

Status Scheduler::failure() const {
  std::lock_guard<std::mutex> lock(failure_mu_);
  return failure_;
}

Status Scheduler::validate(const Request& request) const {
  const int64_t n_vocab = static_cast<int64_t>(runner_->n_vocab());
  for (const TokenId id : request.prompt_token_ids) {
    if (id < 0 || id >= n_vocab) {
      return invalid_argument_error("prompt token id " + std::to_string(id) +
                                    " outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
  SamplingLimits limits;
  limits.n_vocab = n_vocab;
  limits.max_tokens_cap = options_.limits.context_length;
  TANDEM_RETURN_IF_ERROR(request.sampling.validate(limits));
  if (!request.sampling.stop.empty() && options_.tokenizer == nullptr) {
    return invalid_argument_error("stop strings need a tokenizer; this engine has none");
  }
  return check_request(request, options_.limits, budget_);
}

}  // namespace tandem::runtime
