-- bench/memory_probe.lua [ROUNDS | --once WORKLOAD MODE PROBE,... [RATE_US]]:
-- see bench/memory_probe.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path

local perfmon = require("perfmon")
local plugin = require("plugin")
local stats = require("stats")

local once = arg[1] == "--once"
local rounds = not once and tonumber(arg[1] or "") or 12

-- An allocation-heavy workload: three plugins, each 16 frames deep when
-- it allocates (a sample's walk reads them all), building lists of small
-- tables, formatting strings and making a table a call for the host code
-- that calls it (its share of the bytes printed with the accuracy rows).
local allocs = {
  name = "allocs",
  units = 8,
  setup = function(events)
    local deep = [[
      local function deep(n, f, ...)
        if n == 0 then return f(...) end
        return (deep(n - 1, f, ...))
      end
    ]]
    local lists = select(3, plugin.load("lists", deep .. [[
      local function build(n)
        local t = {}
        for i = 1, n do t[i] = { i, i * 2, name = "x" } end
        return t
      end
      return function(n) return deep(16, build, n) end ]]))
    local strings = select(3, plugin.load("strings", deep .. [[
      local function fmt(n)
        local parts = {}
        for i = 1, n do parts[i] = string.format("%d:%d", i, i * 7) end
        return table.concat(parts, ",")
      end
      return function(n) return deep(16, fmt, n) end ]]))
    local maker = select(3, plugin.load("maker", deep .. [[
      local function make(i) return { i, i } end
      return function(i) return deep(16, make, i) end ]]))
    local function step()
      lists(20000)
      strings(10000)
      local keep = {}
      for i = 1, 5000 do keep[i] = maker(i) end
      return #keep
    end
    return {
      run = function(drive)
        local sum = 0
        for _ = 1, events * 5 do sum = sum + drive(step) end
        return sum
      end,
    }
  end,
}

-- The same at the bottom of a 5,000-frame recursion: a walk of the stack
-- there holds the next off for as many strides as it is long.
local deep = {
  name = "deep",
  units = 8,
  setup = function(events)
    local run = select(3, plugin.load("deep", [[
      local function rec(n, k)
        if n > 0 then return (rec(n - 1, k)) end
        local t = {}
        for i = 1, k do t[i] = { i, i * 2, name = "x" } end
        return #t
      end
      return function(k) return rec(5000, k) end ]]))
    return {
      run = function(drive)
        local sum = 0
        for _ = 1, events * 5 do sum = sum + drive(run, 20000) end
        return sum
      end,
    }
  end,
}

local function workload(name)
  return ({ allocs = allocs, deep = deep })[name] or require("workloads." .. name)
end

-- --once: one quarter-size run of one workload under one monitor, for a
-- count of the instructions the whole process runs (callgrind).
if once then
  local w, mode, probes = workload(arg[2]), arg[3], {}
  for p in (arg[4] or ""):gmatch("[^,]+") do probes[#probes + 1] = p end
  probes.mode, probes.rate_us = mode, tonumber(arg[5] or "")
  local inst = w.setup(math.max(1, math.floor(w.units / 4)))
  local _ <close> = perfmon.monitor(probes)
  inst.run(perfmon.event)
  return
end

-- Two monitors' probes, timed side by side in interleaved rounds of a
-- quarter-size run each; prints the median ratio (b over a) and its IQR.
local function table_of(title, a, b, names)
  print(title)
  print(("%-11s %10s %10s %9s %11s"):format("workload", a.label .. " ms", b.label .. " ms", "ratio", "IQR"))
  for _, name in ipairs(names) do
    local w = workload(name)
    local inst = w.setup(math.max(1, math.floor(w.units / 4)))
    local by = { a = a.probes, b = b.probes }
    local function run(mode)
      collectgarbage("collect")
      local _ <close> = perfmon.monitor(by[mode])
      local t0 = os.clock()
      inst.run(perfmon.event)
      return os.clock() - t0
    end
    run("a") -- warm-up
    local times = stats.interleave({ "a", "b" }, rounds, run)
    local q = stats.paired(times, "b", "a")
    print(("%-11s %10.1f %10.1f %9.3f %11s"):format(name, stats.median(times.a) * 1000,
      stats.median(times.b) * 1000, q.median, stats.iqr(q)))
  end
end

print(("memory_probe: %d interleaved rounds of a quarter-size run per monitor; os.clock CPU time")
  :format(rounds))
table_of("exact mode: the probe's cost",
  { label = "time", probes = { "jank", "ticks" } },
  { label = "memory", probes = { "jank", "ticks", "memory" } },
  { "fib", "editor", "coroutines", "tables", "groups1000", "allocs" })
table_of("sampled mode: the probe's cost",
  { label = "sampled", probes = { "jank", mode = "sampled" } },
  { label = "memory", probes = { "jank", "memory", mode = "sampled" } },
  { "fib", "editor", "coroutines", "tables", "groups1000", "allocs", "deep" })

-- Accuracy: the allocs workload under an exact monitor and a sampled one
-- in turn, each group's sampled figures over the exact ones.
print("sampled mode: each group's figures over the exact mode's, allocs, " .. rounds .. " pairs of runs")
local inst = allocs.setup(2)
local ratios, mb = {}, 0
for _ = 1, rounds do
  local got = {}
  for _, mode in ipairs{ "exact", "sampled" } do
    local mon <close> = perfmon.monitor{ "jank", "memory", mode = mode }
    local before = mon:snapshot()
    inst.run(perfmon.event)
    got[mode] = mon:snapshot():subtract(before)
  end
  mb = got.exact.process.alloc_bytes / 2^20
  for id, ex in pairs(got.exact.groups) do
    local st = got.sampled.groups[id]
    if st and ex.alloc_bytes >= 0.05 * got.exact.process.alloc_bytes then
      local r = ratios[ex.name] or { bytes = {}, count = {}, share = {} }
      ratios[ex.name] = r
      r.bytes[#r.bytes + 1] = st.alloc_bytes / ex.alloc_bytes
      r.count[#r.count + 1] = st.alloc_count / ex.alloc_count
      r.share[#r.share + 1] = ex.alloc_bytes / got.exact.process.alloc_bytes
    end
  end
end
print(("%.1f MB a run (a quarter-size run), %d points of 16 KB"):format(mb, math.floor(mb * 64)))
print(("%-8s %6s %14s %21s %14s %21s"):format("group", "share", "bytes median", "bytes min-max", "blocks median",
  "blocks min-max"))
local names = {}
for name in pairs(ratios) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do
  local r = ratios[name]
  print(("%-8s %6.3f %14.3f %10.3f-%-10.3f %14.3f %10.3f-%-10.3f"):format(name, stats.median(r.share),
    stats.median(r.bytes), math.min(table.unpack(r.bytes)), math.max(table.unpack(r.bytes)),
    stats.median(r.count), math.min(table.unpack(r.count)), math.max(table.unpack(r.count))))
end
