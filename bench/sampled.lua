--- bench/sampled.lua: how close the sampled mode's figures are to the exact
-- mode's (issue 18's targets), as a bench: these are figures to read, not
-- timed tests.
--
-- 1. Groups: the editor workload (bench/workloads/editor.lua) for SECONDS
--    of CPU under an exact monitor, then the same work under a sampled
--    one; each group's CPU and self time, and the ratio sampled / exact.
--    The exact mode's figures include its hook's own cost, which runs in
--    the groups' frames (the more calls a group makes, the more), so the
--    shares of the groups' total are compared too; and the same for
--    plugins that make few calls (loops of arithmetic, one of them in a
--    coroutine), where the exact figures are the truth.
--    Then the truth with no monitor: each plugin run alone, timed with
--    os.clock against the host's loop with no plugin.
-- 2. Alerts: a plugin janking JANK_MS in every other event beside one that
--    never reaches 32 ms (up to QUICK_MS), under a sampled watcher whose
--    jank threshold is THRESHOLD_MS: the share of the janks alerted, and
--    the quick plugin's alerts (none expected).
--
-- Run it with bench/sampled (builds first); by hand:
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;bench/?.lua;;" LUA_CPATH_5_4="build/?.so;;" \
--     lua5.4 bench/sampled.lua [SECONDS [RATE_US]]
-- RATE_US: the sampled monitors' rate_us in part 1 (their default
-- without it).

package.path = "bench/?.lua;" .. package.path
local perfmon = require("perfmon")
local watcher = require("perfmon.watcher")
local plugin = require("plugin")

local SECONDS = tonumber(arg[1] or "10")
local RATE_US = arg[2] and math.tointeger(tonumber(arg[2]))
-- the timer and the rate_us the sampled monitors get (perfmon.monitor's
-- default without RATE_US)
local SAMPLED_TIMER, SAMPLED_RATE_US = (function()
  local mon <close> = perfmon.monitor { "jank", mode = "sampled", rate_us = RATE_US }
  return perfmon.info().sampled_timer, mon.rate_us
end)()
local JANK_MS, QUICK_MS, THRESHOLD_MS, JANKS = 64, 31, 48, 40

----------------------------------------------------------------------------
-- 1. Groups
----------------------------------------------------------------------------

local editor = require("workloads.editor")
local edit = editor.setup(editor.units)

-- Plugins that make few calls: loops of arithmetic, in shares of 1, 3, 6
-- and 10; the last runs in a coroutine its caller resumes.
local LOOP = [[
  local function spin(n)
    local s = 0
    for i = 1, n do s = s + i % 7 end
    return s
  end
]]
local spins = {}
for i, share in ipairs { 1, 3, 6 } do
  local _, _, f = plugin.load("loop" .. share, LOOP .. "return spin", nil)
  spins[i] = { f = f, n = share * 20000 }
end
local _, _, resumer = plugin.load("resumer", LOOP .. [[
  local co = coroutine.wrap(function(n) while true do n = coroutine.yield(spin(n)) end end)
  return function(n) return co(n) end]], nil)
spins[#spins + 1] = { f = resumer, n = 10 * 20000 }
local loops = {
  run = function(drive)
    for _ = 1, 200 do
      drive(function() for _, s in ipairs(spins) do s.f(s.n) end end)
    end
  end,
}

-- Runs w under a monitor of mode until `seconds` of CPU have passed (or
-- `runs` times); returns the groups' figures and the runs.
local function measure(w, mode, seconds, runs)
  local mon = perfmon.monitor { "jank", mode = mode, rate_us = mode == "sampled" and RATE_US or nil }
  local before = mon:snapshot()
  local t0, n = os.clock(), 0
  repeat
    w.run(perfmon.event)
    n = n + 1
  until (runs and n >= runs) or (not runs and os.clock() - t0 >= seconds)
  local d = mon:snapshot():subtract(before)
  mon:close()
  return d, n, os.clock() - t0
end

local function total(snap, field)
  local sum = 0
  for _, st in pairs(snap.groups) do sum = sum + st[field] end
  return sum
end

-- The relative standard error of a group's sampled time, from the counts
-- alone: of n samples, each finds the group with probability q (its share
-- of the CPU time, by the exact mode), so it is found n*q times give or
-- take sqrt(n*q*(1-q)).  A share error within twice that is what sampling
-- gives at this rate, whatever the code.
local function sampling_error(n, q)
  if n <= 0 or q <= 0 then return math.huge end
  return math.sqrt((1 - math.min(q, 1)) / (n * q))
end

local function compare(title, w, seconds)
  local samples = perfmon.info().samples
  local exact, runs, exact_s = measure(w, "exact", seconds)
  local sampled, _, sampled_s = measure(w, "sampled", nil, runs)
  local n = perfmon.info().samples - samples
  print(("%s: %d runs, %.1f s of CPU exact, %.1f s sampled (%d samples, %s timer, rate_us %d)")
    :format(title, runs, exact_s, sampled_s, n, SAMPLED_TIMER, SAMPLED_RATE_US))
  print(("%-12s %10s %10s %7s %8s %6s   %10s %10s %7s %8s %6s"):format("group", "exact ms",
    "sampled", "ratio", "shares", "2σ", "self ex.", "sampled", "ratio", "shares", "2σ"))
  local worst, beyond = { cpu_us = 0, self_us = 0 }, {}
  local names = {}
  for id, st in pairs(exact.groups) do
    if st.cpu_us > 0 then names[#names + 1] = { id = id, name = st.name } end
  end
  table.sort(names, function(a, b) return a.name < b.name end)
  for _, g in ipairs(names) do
    local e, s = exact.groups[g.id], sampled.groups[g.id] or { cpu_us = 0, self_us = 0 }
    local row = { ("%-12s"):format(g.name) }
    for _, f in ipairs { "cpu_us", "self_us" } do
      local shares = (s[f] / total(sampled, f)) / (e[f] / total(exact, f))
      local two_sigma = 2 * sampling_error(n, e[f] / exact.process.cpu_us)
      worst[f] = math.max(worst[f], math.abs(shares - 1))
      if math.abs(shares - 1) > two_sigma then
        beyond[#beyond + 1] = g.name .. (f == "self_us" and " (self)" or "")
      end
      row[#row + 1] = ("%10.1f %10.1f %7.3f %8.3f %5.1f%%"):format(e[f] / 1000, s[f] / 1000,
        s[f] / e[f], shares, 100 * two_sigma)
    end
    print(table.concat(row, "   "))
  end
  print(("  largest share error: %.1f%% inclusive, %.1f%% self (target: 10%%)")
    :format(100 * worst.cpu_us, 100 * worst.self_us))
  print(("  beyond twice the sampling error: %s"):format(#beyond > 0 and table.concat(beyond, ", ") or "none"))
  return exact, sampled
end

-- The truth with no monitor at all: each plugin's inclusive time is the
-- run with only its on_key against the run with none (the host's loop
-- alone), the fastest of REPS runs of each.  The shared library is called
-- from the plugins and has no run of its own.  Against it, each plugin's
-- share of the plugins' time by each mode: the exact mode's hook runs
-- inside the groups (the more calls, the more), the sampled mode's
-- samples do not.  A plugin alone is not quite a plugin among the others
-- (the collector's work, the caches), and a small one's few milliseconds
-- carry the timer's noise: a figure to read beside the two modes'.
local REPS = 7

local function timed_run(w)
  collectgarbage("collect")
  local t0 = os.clock()
  w.run(function(f, ...) return f(...) end)
  return os.clock() - t0
end

local function truth(w, exact, sampled)
  local keys, stubs = {}, {}
  for i, env in ipairs(w.plugins) do
    keys[i] = env.on_key
    stubs[i] = function() return 0 end
  end
  local function only(k) -- k: one plugin's index, or none
    for i, env in ipairs(w.plugins) do env.on_key = i == k and keys[i] or stubs[i] end
  end
  local best = {}
  for _ = 1, REPS do
    for k = 0, #w.plugins do
      only(k)
      local t = timed_run(w)
      best[k] = math.min(best[k] or math.huge, t)
    end
  end
  only(nil)
  for i, env in ipairs(w.plugins) do env.on_key = keys[i] end
  local rows, sums = {}, { truth = 0, exact = 0, sampled = 0 }
  for i = 1, #w.plugins do
    local g = w.groups[i + 1]
    local r = { name = exact.groups[g.id].name, truth = math.max(best[i] - best[0], 0) * 1e6,
      exact = exact.groups[g.id].cpu_us, sampled = (sampled.groups[g.id] or { cpu_us = 0 }).cpu_us }
    for f in pairs(sums) do sums[f] = sums[f] + r[f] end
    rows[#rows + 1] = r
  end
  print(("truth, editor workload: each plugin's inclusive time alone with no monitor, the fastest of %d runs,"):format(REPS))
  print(("  less the host's loop alone (%.1f ms a run); shares of the plugins' time, mode / truth"):format(best[0] * 1000))
  print(("%-12s %10s %8s %8s %8s"):format("group", "truth ms", "share", "exact", "sampled"))
  table.sort(rows, function(a, b) return a.name < b.name end)
  for _, r in ipairs(rows) do
    local share = r.truth / sums.truth
    print(("%-12s %10.2f %7.1f%% %8.3f %8.3f"):format(r.name, r.truth / 1000, 100 * share,
      (r.exact / sums.exact) / share, (r.sampled / sums.sampled) / share))
  end
end

local edit_exact, edit_sampled = compare("groups, editor workload", edit, SECONDS)
truth(edit, edit_exact, edit_sampled)
compare("groups, loops of arithmetic", loops, SECONDS / 2)
print("  ratio = sampled / exact; shares = the ratio of the group's shares of all groups' time;")
print("  2σ = twice the relative standard error of n samples for the group's share of the CPU time")

----------------------------------------------------------------------------
-- 2. Alerts
----------------------------------------------------------------------------

local BURN = [[
  local function burn(ms)
    local t = os.clock() + ms / 1000
    while os.clock() < t do end
  end
  return burn
]]
local _, janky_g, janky = plugin.load("janky", BURN, { os = os })
local _, quick_g, quick = plugin.load("quick", BURN, { os = os })

local alerted = {}
local function listen(batch)
  for _, a in ipairs(batch) do
    alerted[a.source.id] = (alerted[a.source.id] or 0) + a.details.count
  end
end
watcher.configure { mode = "sampled", jank_threshold_us = THRESHOLD_MS * 1000,
  buffering_delay_ms = 0 }
watcher.add_listener("*", listen)
for i = 1, 2 * JANKS do
  perfmon.event(function()
    quick(QUICK_MS * (0.5 + 0.5 * (i % 3) / 2)) -- up to QUICK_MS, never 32
    if i % 2 == 0 then janky(JANK_MS) end
  end)
  watcher.flush()
end
watcher.remove_listener("*", listen)
print(("alerts: %d events, %d of them with a %d ms jank; sampled watcher, threshold %d ms")
  :format(2 * JANKS, JANKS, JANK_MS, THRESHOLD_MS))
print(("  janky alerted in %d of %d janks (%.0f%%; target 90%%), quick (up to %d ms) %d times (target 0)")
  :format(alerted[janky_g.id] or 0, JANKS, 100 * (alerted[janky_g.id] or 0) / JANKS, QUICK_MS,
    alerted[quick_g.id] or 0))
