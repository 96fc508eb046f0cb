// Tests of RequestQueue and RequestHandle: bounds, duplicate ids, events, cancellation, and a
// multi-threaded producers/consumer run (built under ThreadSanitizer too).
#include "engine/runtime/request_queue.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tandem::runtime {
namespace {

using std::chrono::milliseconds;

Request make_request(std::string id, size_t prompt = 4) {
  Request r;
  r.id = std::move(id);
  r.prompt_token_ids.assign(prompt, 7);
  return r;
}

TEST_CASE("a full queue refuses at once with RESOURCE_EXHAUSTED (C1)", "[queue]") {
  RequestQueue queue(2);
  auto a = queue.submit(make_request("a"));
  auto b = queue.submit(make_request("b"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto c = queue.submit(make_request("c"));
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == StatusCode::kResourceExhausted);
  CHECK(c.status().message().find("2 requests in flight") != std::string::npos);
  // Draining does not free a slot: the bound covers every request until its final event.
  auto accepted = queue.drain();
  REQUIRE(accepted.size() == 2);
  CHECK(queue.submit(make_request("c")).status().code() == StatusCode::kResourceExhausted);
  queue.finish(*accepted[0].channel, FinishReason::kStop, {});
  CHECK(queue.submit(make_request("c")).ok());
  CHECK(queue.in_flight() == 2);
}

TEST_CASE("a duplicate in-flight id is refused with ALREADY_EXISTS", "[queue]") {
  RequestQueue queue(8);
  auto first = queue.submit(make_request("same"));
  REQUIRE(first.ok());
  auto dup = queue.submit(make_request("same"));
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.status().code() == StatusCode::kAlreadyExists);
  CHECK(dup.status().message().find("'same'") != std::string::npos);
  CHECK(queue.submit(make_request("")).status().code() == StatusCode::kInvalidArgument);
  auto accepted = queue.drain();
  REQUIRE(accepted.size() == 1);
  queue.finish(*accepted[0].channel, FinishReason::kLength, {4, 1, 0});
  CHECK(queue.submit(make_request("same")).ok());  // reusable once finished
}

TEST_CASE("the validator rejects before a slot is taken; close refuses", "[queue]") {
  RequestQueue queue(1, [](const Request& r) {
    return r.prompt_token_ids.empty() ? invalid_argument_error("empty prompt") : Status();
  });
  CHECK(queue.submit(make_request("x", 0)).status().code() == StatusCode::kInvalidArgument);
  CHECK(queue.in_flight() == 0);
  queue.close();
  CHECK(queue.submit(make_request("y")).status().code() == StatusCode::kUnavailable);
  CHECK(queue.wait_for_work(milliseconds(0)));  // close wakes the scheduler
}

TEST_CASE("events arrive in order and exactly one final event is delivered", "[queue]") {
  RequestQueue queue(4);
  auto submitted = queue.submit(make_request("r", 5));
  REQUIRE(submitted.ok());
  RequestHandle handle = std::move(submitted).value();
  CHECK(handle.id() == "r");
  CHECK_FALSE(handle.try_next().has_value());
  CHECK_FALSE(handle.next(milliseconds(1)).has_value());  // times out: nothing pushed yet

  auto accepted = queue.drain();
  REQUIRE(accepted.size() == 1);
  CHECK(accepted[0].request.prompt_token_ids.size() == 5);
  RequestChannel& channel = *accepted[0].channel;
  queue.push_tokens(channel, {11}, "a");
  queue.push_tokens(channel, {12, 13}, "bc");
  queue.finish(channel, FinishReason::kLength, {5, 3, 0});
  queue.finish(channel, FinishReason::kAbort, {});  // ignored: already final
  queue.push_tokens(channel, {99});                 // ignored
  CHECK(channel.finished());

  auto e1 = handle.try_next();
  REQUIRE(e1.has_value());
  CHECK(e1->token_ids == std::vector<TokenId>{11});
  CHECK(e1->text == "a");
  CHECK_FALSE(e1->is_final);
  auto e2 = handle.next(milliseconds(1000));
  REQUIRE(e2.has_value());
  CHECK(e2->token_ids == std::vector<TokenId>{12, 13});
  auto fin = handle.next(milliseconds(1000));
  REQUIRE(fin.has_value());
  CHECK(fin->is_final);
  CHECK(fin->finish_reason == FinishReason::kLength);
  CHECK(fin->usage == Usage{5, 3, 0});
  CHECK(handle.done());
  CHECK_FALSE(handle.try_next().has_value());
  CHECK(finish_reason_name(fin->finish_reason) == "length");
}

TEST_CASE("an n-sample request's stream ends after every sample's final event", "[queue]") {
  RequestQueue queue(4);
  Request r = make_request("n3");
  r.n = 3;
  auto handle = queue.submit(r);
  REQUIRE(handle.ok());
  auto accepted = queue.drain();
  REQUIRE(accepted.size() == 1);
  RequestChannel& channel = *accepted[0].channel;
  CHECK(channel.samples() == 3);
  queue.push_tokens(channel, {5}, "", {}, 1);
  queue.finish(channel, FinishReason::kLength, {4, 1, 0}, Status(), {6}, {}, {}, 1);
  queue.push_tokens(channel, {9}, "", {}, 1);  // after sample 1's final: ignored
  queue.finish(channel, FinishReason::kStop, {}, Status(), {}, {}, {}, 1);  // ignored too
  queue.push_tokens(channel, {7}, "", {}, 0);
  CHECK_FALSE(channel.finished());
  // The id stays in flight until the last sample ends.
  CHECK(queue.submit(make_request("n3")).status().code() == StatusCode::kAlreadyExists);
  queue.finish(channel, FinishReason::kLength, {}, Status(), {}, {}, {}, 0);
  queue.finish(channel, FinishReason::kAbort, {}, Status(), {}, {}, {}, 2);
  CHECK(channel.finished());
  std::vector<std::pair<int64_t, bool>> seen;  // (index, final)
  while (!handle->done()) {
    auto ev = handle->next(milliseconds(1000));
    REQUIRE(ev.has_value());
    seen.emplace_back(ev->index, ev->is_final);
  }
  CHECK(seen == std::vector<std::pair<int64_t, bool>>{
                    {1, false}, {1, true}, {0, false}, {0, true}, {2, true}});
  CHECK_FALSE(handle->try_next().has_value());
  CHECK(queue.submit(make_request("n3")).ok());
  // n below 1 is refused at submission, even without a validator.
  Request none = make_request("n0");
  none.n = 0;
  CHECK(queue.submit(none).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("cancel is idempotent and dropping a handle cancels its request", "[queue]") {
  RequestQueue queue(4);
  auto a = queue.submit(make_request("a"));
  auto b = queue.submit(make_request("b"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto accepted = queue.drain();
  REQUIRE(accepted.size() == 2);
  CHECK_FALSE(queue.wait_for_work(milliseconds(0)));
  RequestHandle ha = std::move(a).value();
  ha.cancel();
  ha.cancel();
  CHECK(accepted[0].channel->cancelled());
  CHECK_FALSE(accepted[1].channel->cancelled());
  CHECK(queue.wait_for_work(milliseconds(0)));  // the cancel woke the scheduler
  { RequestHandle dropped = std::move(b).value(); }
  CHECK(accepted[1].channel->cancelled());

  // A handle whose final event was read does not cancel on destruction (nothing to cancel).
  auto c = queue.submit(make_request("c"));
  REQUIRE(c.ok());
  auto accepted_c = queue.drain();
  queue.finish(*accepted_c[0].channel, FinishReason::kStop, {});
  {
    RequestHandle hc = std::move(c).value();
    REQUIRE(hc.try_next().has_value());
  }
  CHECK_FALSE(accepted_c[0].channel->cancelled());
}

TEST_CASE("producers and cancellers on several threads with one draining thread", "[queue]") {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 40;
  constexpr int kTokensPerRequest = 5;
  RequestQueue queue(8);
  std::atomic<bool> stop{false};

  std::thread consumer([&] {
    struct Active {
      std::shared_ptr<RequestChannel> channel;
      int64_t prompt;
      int64_t sent;
    };
    std::vector<Active> active;
    while (!stop.load() || !active.empty()) {
      for (auto& accepted : queue.drain()) {
        active.push_back(
            {accepted.channel, static_cast<int64_t>(accepted.request.prompt_token_ids.size()), 0});
      }
      if (active.empty()) {
        queue.wait_for_work(milliseconds(2));
        continue;
      }
      for (auto it = active.begin(); it != active.end();) {
        if (it->channel->cancelled()) {
          queue.finish(*it->channel, FinishReason::kAbort, {it->prompt, it->sent, 0});
          it = active.erase(it);
        } else if (it->sent == kTokensPerRequest) {
          queue.finish(*it->channel, FinishReason::kLength, {it->prompt, it->sent, 0});
          it = active.erase(it);
        } else {
          queue.push_tokens(*it->channel, {static_cast<TokenId>(it->sent)});
          ++it->sent;
          ++it;
        }
      }
    }
  });

  std::atomic<int> finals{0}, aborts{0}, lengths{0}, bad{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937 rng(static_cast<uint32_t>(p) * 7919u + 1u);
      for (int i = 0; i < kPerProducer; ++i) {
        const std::string id = "p" + std::to_string(p) + "-" + std::to_string(i);
        Result<RequestHandle> submitted = queue.submit(make_request(id));
        while (!submitted.ok()) {
          if (submitted.status().code() != StatusCode::kResourceExhausted) {
            ++bad;
            return;
          }
          std::this_thread::yield();
          submitted = queue.submit(make_request(id));
        }
        RequestHandle handle = std::move(submitted).value();
        const int cancel_after = static_cast<int>(rng() % 8);  // >= 5: never cancels
        int tokens = 0;
        int final_count = 0;
        if (cancel_after == 0) handle.cancel();
        while (!handle.done()) {
          auto event = handle.next(milliseconds(50));
          if (!event) continue;
          if (event->is_final) {
            ++final_count;
            if (event->usage.completion_tokens != tokens) ++bad;
            if (event->finish_reason == FinishReason::kAbort) ++aborts;
            if (event->finish_reason == FinishReason::kLength) ++lengths;
          } else {
            tokens += static_cast<int>(event->token_ids.size());
            if (tokens == cancel_after) {
              handle.cancel();
              handle.cancel();
            }
          }
        }
        if (final_count != 1) ++bad;
        if (handle.try_next().has_value()) ++bad;
        ++finals;
      }
    });
  }
  for (auto& t : producers) t.join();
  stop.store(true);
  consumer.join();
  CHECK(bad.load() == 0);
  CHECK(finals.load() == kProducers * kPerProducer);
  CHECK(aborts.load() + lengths.load() == kProducers * kPerProducer);
  CHECK(aborts.load() > 0);
  CHECK(lengths.load() > 0);
  CHECK(queue.in_flight() == 0);
  CHECK(queue.pending() == 0);
}

}  // namespace
}  // namespace tandem::runtime
