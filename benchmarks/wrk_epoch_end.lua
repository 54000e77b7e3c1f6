-- wrk script for benchmarks/webhook_ingest.py: a stream of `epoch_end` webhook events, shaped like the ones
-- ultralytics/utils/callbacks/platform.py sends (on_fit_epoch_end), for a set of simulated training runs.
--
-- Run wrk with as many threads as connections (-t N -c N): each wrk thread then holds exactly one connection
-- and owns one model, so its requests go out one after another with that model's epoch counting up from
-- BENCH_EPOCH_START. No two requests ever share a (model, epoch) key, and every request is accounted for:
-- answered 2xx, answered otherwise, or lost in flight (socket error, or still open when wrk stopped).
--
-- Environment:
--   BENCH_MODEL_IDS    comma-separated model ids (thread i gets id i, wrapping around)
--   BENCH_API_KEY      bearer token
--   BENCH_EPOCH_START  first epoch number (default 0)
--   BENCH_PATH         request path (default /api/webhooks/training/metrics)
--   BENCH_VAL_PREFIX   prefix of the validation losses (default "val/")
--
-- done() prints one line `BENCH_RESULT {json}` with the per-status counts, socket errors, latency
-- percentiles (microseconds), the request body size and, per thread/model: requests sent, 2xx received and the epochs that were
-- sent but not acknowledged with a 2xx.

local model_ids_env = os.getenv("BENCH_MODEL_IDS") or ""
local api_key = os.getenv("BENCH_API_KEY") or ""
local path = os.getenv("BENCH_PATH") or "/api/webhooks/training/metrics"
local epoch_start = tonumber(os.getenv("BENCH_EPOCH_START") or "0")
-- "val/" as the trainer names its validation losses; another prefix makes the bodies look like a run trained with
-- val=False (no validation losses), which the server must tell from the final evaluation in another way.
local val_prefix = os.getenv("BENCH_VAL_PREFIX") or "val/"

local function split(s)
  local out = {}
  for item in string.gmatch(s, "[^,]+") do
    out[#out + 1] = item
  end
  return out
end

-- setup() and done() run in wrk's main Lua state; everything else runs in each thread's own state.
local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("tid", #threads)
end

-- Floats go out at full precision (%.17g), the way Python's json.dumps writes the trainer's floats. The runs
-- train on CPU (training_started says device "cpu"), so "gpus" is empty, as SystemLogger reports it there.
local body_format = table.concat({
  '{"modelId":"%s","event":"epoch_end","data":{"epoch":%d,',
  '"metrics":{"train/box_loss":%.17g,"train/cls_loss":%.17g,"train/dfl_loss":%.17g,',
  '"metrics/precision(B)":%.17g,"metrics/recall(B)":%.17g,"metrics/mAP50(B)":%.17g,',
  '"metrics/mAP50-95(B)":%.17g,"' .. val_prefix .. 'box_loss":%.17g,"' .. val_prefix .. 'cls_loss":%.17g,"',
  val_prefix .. 'dfl_loss":%.17g,',
  '"lr":%.17g},',
  '"system":{"cpu":%.1f,"ram":%.1f,"disk":[',
  '{"mount":"/","used_gb":256.8,"total_gb":512.0},{"mount":"/boot/efi","used_gb":0.1,"total_gb":0.5},',
  '{"mount":"/data","used_gb":1843.2,"total_gb":3726.0},{"mount":"/home","used_gb":402.7,"total_gb":915.8}],',
  '"disk_io":{"read_mbs":%.2f,"write_mbs":%.2f},"network":{"recv_mbs":%.2f,"sent_mbs":%.2f},"gpus":{}},',
  '"fitness":%.17g,"best_fitness":%.17g}}',
})

function init(args)
  local ids = split(model_ids_env)
  if #ids == 0 then
    error("BENCH_MODEL_IDS is empty")
  end
  model_id = ids[((tid - 1) % #ids) + 1]
  next_epoch = epoch_start
  sent = 0
  ok = 0
  codes = {}
  unacked = {}        -- epochs sent without a 2xx answer
  pending = nil       -- epoch of the request on the wire, if any
  body_bytes = 0      -- size of the last body sent
  first_error = nil   -- status and body of the first non-2xx answer
  headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. api_key}
end

function request()
  if pending ~= nil then
    -- The previous request got no answer (the connection broke and wrk reconnected).
    unacked[#unacked + 1] = pending
  end
  local e = next_epoch
  next_epoch = next_epoch + 1
  pending = e
  sent = sent + 1
  local t = (e - epoch_start) + 1
  local decay = 1.0 / (1.0 + t / 200.0)
  local map50 = 0.85 - 0.6 * decay
  local map = 0.62 - 0.45 * decay
  local body = string.format(body_format, model_id, e,
    0.9 + 0.6 * decay, 0.5 + 1.8 * decay, 0.85 + 0.5 * decay,
    0.80 - 0.5 * decay, 0.76 - 0.5 * decay, map50, map,
    1.0 + 0.5 * decay, 0.6 + 1.4 * decay, 0.95 + 0.4 * decay, 0.01 * decay + 0.0001,
    35.0 + (e % 40), 61.3 + (e % 7), 12.5 + (e % 9), 8.25, 5.2, 1.1,
    0.1 * map50 + 0.9 * map, 0.1 * map50 + 0.9 * map)
  body_bytes = #body
  return wrk.format("POST", path, headers, body)
end

function response(status, resp_headers, resp_body)
  local key = tostring(status)
  codes[key] = (codes[key] or 0) + 1
  if status >= 200 and status < 300 then
    ok = ok + 1
  else
    if pending ~= nil then
      unacked[#unacked + 1] = pending
    end
    if first_error == nil then
      first_error = key .. " " .. string.sub(resp_body or "", 1, 300)
    end
  end
  pending = nil
end

local function json_string(s)
  s = string.gsub(s, '[%c"\\]', function(c)
    return string.format("\\u%04x", string.byte(c))
  end)
  return '"' .. s .. '"'
end

local function json_int_list(t)
  local parts = {}
  for i, v in ipairs(t) do
    parts[i] = string.format("%d", v)
  end
  return "[" .. table.concat(parts, ",") .. "]"
end

function done(summary, latency, requests)
  local codes_total = {}
  local per_thread = {}
  for i, thread in ipairs(threads) do
    local tcodes = thread:get("codes") or {}
    for k, v in pairs(tcodes) do
      codes_total[k] = (codes_total[k] or 0) + v
    end
    local unacked_list = thread:get("unacked") or {}
    local still_pending = thread:get("pending")
    if still_pending ~= nil then
      unacked_list[#unacked_list + 1] = still_pending
    end
    local first_error = thread:get("first_error")
    per_thread[i] = string.format(
      '{"model":%s,"sent":%d,"ok":%d,"first_epoch":%d,"unacked":%s,"first_error":%s}',
      json_string(thread:get("model_id") or ""), thread:get("sent") or 0, thread:get("ok") or 0, epoch_start,
      json_int_list(unacked_list), first_error and json_string(first_error) or "null")
  end
  local code_parts = {}
  for k, v in pairs(codes_total) do
    code_parts[#code_parts + 1] = string.format("%s:%d", json_string(k), v)
  end
  local body_bytes = 0
  for _, thread in ipairs(threads) do
    body_bytes = math.max(body_bytes, thread:get("body_bytes") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"duration_us":%d,"requests":%d,"bytes":%d,"body_bytes":%d,"codes":{%s},' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},"threads":[%s]}\n',
    summary.duration, summary.requests, summary.bytes, body_bytes, table.concat(code_parts, ","),
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    table.concat(per_thread, ",")))
end
