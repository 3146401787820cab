-- tests/prometheus-check.lua URL SECONDS PID HOST_URL -- the checks of
-- tests/prometheus-test: asks the Prometheus at URL (process PID) what it
-- scraped from examples/metrics_host.lua (at HOST_URL), and compares it
-- with what the host's plugins cost.  Gives up after SECONDS.
--
-- The host runs an event every ~20 ms (it sleeps 20 ms between events);
-- every other event the janky plugin burns 80 ms of CPU by os.clock, the
-- cheap one a few microseconds in each.  So Prometheus must see:
--   - the target up, scraped as OpenMetrics;
--   - janky's CPU rate equal to its event rate x 80 ms (within 25%), and
--     more than 100 times the cheap plugin's;
--   - every janky event in the 64-128 ms bucket of the histogram (none at
--     or under 64 ms, all at or under 128 ms), every cheap one under 1 ms;
--   - the histogram's _sum rate equal to janky's CPU rate;
--   - histogram_quantile on it: janky's median and the process's 0.99
--     quantile in janky's bucket (64-128 ms), the process's median under
--     1 ms (the cheap events, half of them, all that short).

local http = require("socket.http")
local socket = require("socket")
local cjson = require("cjson")

local url, seconds, pid, host_url = arg[1], tonumber(arg[2]), arg[3], arg[4]
assert(url and seconds and pid and host_url,
  "usage: prometheus-check.lua URL SECONDS PID HOST_URL")
local deadline = socket.gettime() + seconds

local function fail(msg)
  io.stderr:write("openmetrics.prometheus: ", msg, "\n")
  os.exit(1)
end

local function alive()
  return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true
end

local function escape(s)
  return (s:gsub("[^%w%-_.~]", function(c) return ("%%%02X"):format(c:byte()) end))
end

-- The API's answer to an instant query, or nil and why.
local function query(expr)
  local body, code = http.request(url .. "/api/v1/query?query=" .. escape(expr))
  if code ~= 200 then return nil, ("HTTP %s: %s"):format(tostring(code), tostring(body)) end
  local ok, doc = pcall(cjson.decode, body)
  if not ok or doc.status ~= "success" then return nil, "bad answer: " .. tostring(body) end
  return doc.data.result
end

-- The single value of expr, or nil.
local function value(expr)
  local result = query(expr)
  if result and #result == 1 then return tonumber(result[1].value[2]) end
end

-- Waits (bounded by the deadline) until ready() returns true.
local function wait(what, ready)
  local last
  while socket.gettime() < deadline do
    if not alive() then fail("prometheus exited while waiting for " .. what) end
    local ok, why = ready()
    if ok then return end
    last = why
    socket.sleep(0.5)
  end
  fail(("gave up after %d s waiting for %s (%s)"):format(seconds, what, tostring(last)))
end

-- The host serves OpenMetrics, which Prometheus then parses as such.
local body, code, headers = http.request(host_url .. "/metrics")
if code ~= 200 or headers["content-type"] ~= "application/openmetrics-text; version=1.0.0; charset=utf-8"
  or body:sub(-6) ~= "# EOF\n" then
  fail(("GET %s/metrics: %s, Content-Type %s"):format(host_url, tostring(code),
    tostring(headers and headers["content-type"])))
end

wait("Prometheus's API", function()
  local r, why = query("1")
  return r ~= nil, why
end)
-- 12 scrapes of the host: enough for rates over 10 s windows
wait("12 scrapes with samples", function()
  local n = value('count_over_time(perfmon_events_total{name="janky"}[1m])')
  local up = value('up{job="perfmon"}')
  return n and n >= 12 and up == 1, ("%s scrapes, up = %s"):format(tostring(n), tostring(up))
end)

local function get(expr)
  local v = value(expr)
  if not v then fail("no single value for " .. expr .. ": " .. cjson.encode(query(expr) or {})) end
  return v
end

local RANGE = "[10s]"
local function cpu_rate(name)
  return get(('sum(rate(perfmon_cpu_seconds_total{name="%s"}%s))'):format(name, RANGE))
end
local janky_cpu, cheap_cpu = cpu_rate("janky"), cpu_rate("cheap")
local janky_events = get(('rate(perfmon_events_total{name="janky"}%s)'):format(RANGE))
local cheap_events = get(('rate(perfmon_events_total{name="cheap"}%s)'):format(RANGE))
local janky_sum = get(('rate(perfmon_event_cpu_seconds_sum{name="janky"}%s)'):format(RANGE))
local process_cpu = get(("sum(rate(perfmon_process_cpu_seconds_total%s))"):format(RANGE))
local function bucket(name, le)
  return get(('perfmon_event_cpu_seconds_bucket{name="%s",le="%s"}'):format(name, le))
end
local janky_count = get('perfmon_event_cpu_seconds_count{name="janky"}')
local cheap_count = get('perfmon_event_cpu_seconds_count{name="cheap"}')
local scrape_type = query('scrape_samples_scraped{job="perfmon"}')
local function quantile(q, family, selector)
  return get(("histogram_quantile(%g, sum by (le) (rate(%s_bucket%s%s)))"):format(
    q, family, selector, RANGE))
end
local janky_p50 = quantile(0.5, "perfmon_event_cpu_seconds", '{name="janky"}')
local process_p99 = quantile(0.99, "perfmon_process_event_cpu_seconds", "")
local process_p25 = quantile(0.25, "perfmon_process_event_cpu_seconds", "")

local expected = janky_events * 0.080
print(("openmetrics.prometheus: janky %.3f CPU s/s (%.2f events/s x 80 ms = %.3f), "
  .. "histogram _sum %.3f s/s; cheap %.5f CPU s/s (%.2f events/s); process %.3f; "
  .. "janky events %d (le=0.064: %d, le=0.128: %d), cheap events %d (le=0.001: %d); "
  .. "%s samples a scrape; histogram_quantile: janky 0.5 %.3f s, process 0.99 %.3f s, "
  .. "0.25 %.4f s"):format(
  janky_cpu, janky_events, expected, janky_sum, cheap_cpu, cheap_events, process_cpu,
  janky_count, bucket("janky", "0.064"), bucket("janky", "0.128"),
  cheap_count, bucket("cheap", "0.001"),
  scrape_type and scrape_type[1] and scrape_type[1].value[2] or "?",
  janky_p50, process_p99, process_p25))

local function check(ok, msg) if not ok then fail(msg) end end
check(janky_events > 0, "janky ran no events")
check(math.abs(janky_cpu - expected) <= 0.25 * expected,
  ("janky's CPU rate %.3f is not its event rate x 80 ms = %.3f (within 25%%)"):format(janky_cpu, expected))
check(math.abs(janky_sum - janky_cpu) <= 0.25 * janky_cpu,
  ("janky's histogram _sum rate %.3f differs from its CPU rate %.3f"):format(janky_sum, janky_cpu))
check(janky_cpu > 100 * cheap_cpu,
  ("janky's CPU rate %.4f does not dominate cheap's %.5f"):format(janky_cpu, cheap_cpu))
check(cheap_events > 1.5 * janky_events,
  ("cheap runs in every event, janky in every other: %.2f vs %.2f events/s"):format(cheap_events, janky_events))
check(janky_cpu <= process_cpu * 1.05 + 0.01,
  ("janky's CPU rate %.3f above the process's %.3f"):format(janky_cpu, process_cpu))
check(janky_count >= 10, ("only %d janky events"):format(janky_count))
check(bucket("janky", "0.064") == 0, "janky events at or under 64 ms")
check(bucket("janky", "0.128") == janky_count, "janky events over 128 ms")
check(bucket("janky", "+Inf") == janky_count, "janky's +Inf bucket is not its count")
check(bucket("cheap", "0.001") == cheap_count, "cheap events of 1 ms or more")
check(janky_p50 >= 0.064 and janky_p50 <= 0.128,
  ("histogram_quantile(0.5) of janky's events %.3f s is not in its bucket 0.064-0.128"):format(janky_p50))
check(process_p99 >= 0.064 and process_p99 <= 0.128,
  ("histogram_quantile(0.99) of the process's events %.3f s is not in 0.064-0.128"):format(process_p99))
check(process_p25 <= 0.001,
  ("histogram_quantile(0.25) of the process's events %.4f s is not under 1 ms"):format(process_p25))
