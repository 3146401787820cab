-- bench/groups.lua: what groups that come and go cost a long-lived host
-- (bench/groups runs it).
--   live N...      snapshot time (CPU ms, median of 5) with N live groups
--   churn S P      S sessions, each making P plugins with a group, running
--                  them in one event each and dropping them; prints RSS
--                  and snapshot time every tenth of the way
--   chunks N       N chunks loaded, run and dropped under the chunks probe:
--                  perfmon's memory and RSS before and after
--   per_event N    a chunk compiled and run in each of N events under the
--                  chunks probe, and never a snapshot (a template engine
--                  watched by the watcher alone): perfmon's groups (live
--                  and dead) and memory every tenth of the way, then how
--                  long the first snapshot takes
local perfmon = require("perfmon")

local SRC = "local x = 0 return function(n) for _ = 1, n do x = x + 1 end return x end"

local function rss_kb()
  local f = assert(io.open("/proc/self/status"))
  local kb = tonumber(f:read("a"):match("VmRSS:%s*(%d+)"))
  f:close()
  return kb
end

local function full_gc()
  collectgarbage()
  collectgarbage()
end

local function snapshot_ms(mon)
  local times = {}
  for i = 1, 5 do
    local t0 = os.clock()
    mon:snapshot()
    times[i] = (os.clock() - t0) * 1000
  end
  table.sort(times)
  return times[3]
end

local function plugin(name)
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  return g, assert(perfmon.load(SRC, "=" .. name, env, g))()
end

local bench = {}

function bench.live(...)
  print("live groups   snapshot ms")
  for _, a in ipairs{ ... } do
    local n = assert(math.tointeger(tonumber(a)), "live: N must be an integer")
    local mon <close> = perfmon.monitor{ "jank", "ticks" }
    local keep = {}
    for i = 1, n do
      local g, work = plugin("p" .. i)
      perfmon.event(work, 1) -- a period's end: outside events it never ends
      keep[i] = { g, work }
    end
    print(("%11d %13.2f"):format(n, snapshot_ms(mon)))
  end
end

function bench.churn(sessions, plugins)
  sessions, plugins = math.tointeger(tonumber(sessions)), math.tointeger(tonumber(plugins))
  assert(sessions and plugins, "churn: S and P must be integers")
  local mon <close> = perfmon.monitor{ "jank", "ticks" }
  local first
  print("session   groups made   live   perfmon KB   RSS KB   snapshot ms")
  for s = 1, sessions do
    for i = 1, plugins do
      local _, work = plugin(("s%d/p%d"):format(s, i))
      perfmon.event(work, 10)
    end
    full_gc()
    local ms = snapshot_ms(mon)
    local row = { s * plugins, perfmon.info().groups, perfmon.info().bytes // 1024, rss_kb(), ms }
    first = first or row
    if s == 1 or s % math.max(1, sessions // 10) == 0 then
      print(("%7d %13d %6d %12d %8d %13.2f"):format(s, table.unpack(row)))
    end
    if s == sessions then
      print(("last / first: perfmon memory %.2fx, RSS %.2fx, snapshot %.2fx"):format(
        row[3] / first[3], row[4] / first[4], row[5] / first[5]))
    end
  end
end

function bench.chunks(n)
  n = assert(math.tointeger(tonumber(n)), "chunks: N must be an integer")
  local mon <close> = perfmon.monitor{ "jank", "chunks" }
  full_gc()
  local b0, r0 = perfmon.info().bytes, rss_kb()
  local keep = {}
  for i = 1, n do
    perfmon.event(function()
      keep[i] = assert(load(SRC, "=chunk " .. i))()
      keep[i](1)
    end)
  end
  mon:snapshot()
  local b1, r1, g1 = perfmon.info().bytes, rss_kb(), perfmon.info().groups
  keep = nil
  full_gc()
  mon:snapshot()
  local b2, r2, g2 = perfmon.info().bytes, rss_kb(), perfmon.info().groups
  print("chunks     when          groups   perfmon KB   RSS KB")
  print(("%7d    before      %9d %12d %8d"):format(n, 0, b0 // 1024, r0))
  print(("%7d    loaded      %9d %12d %8d"):format(n, g1, b1 // 1024, r1))
  print(("%7d    dropped     %9d %12d %8d"):format(n, g2, b2 // 1024, r2))
end

function bench.per_event(n)
  n = assert(math.tointeger(tonumber(n)), "per_event: N must be an integer")
  local mon <close> = perfmon.monitor{ "jank", "chunks" }
  full_gc()
  local most = 0
  print("events   groups held   most held   perfmon KB   RSS KB")
  for i = 1, n do
    perfmon.event(function() assert(load("return " .. i, "=template " .. i))() end)
    local info = perfmon.info()
    most = math.max(most, info.groups + info.dead_groups)
    if i % (n // 10) == 0 then
      print(("%6d %13d %11d %12d %8d"):format(i, info.groups + info.dead_groups, most,
        info.bytes // 1024, rss_kb()))
    end
  end
  local t0 = os.clock()
  mon:snapshot()
  print(("first snapshot: %.2f ms"):format((os.clock() - t0) * 1000))
end

local what = arg[1]
assert(bench[what], "usage: groups.lua live N... | churn S P | chunks N | per_event N")
bench[what](table.unpack(arg, 2))
