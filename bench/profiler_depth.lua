-- bench/profiler_depth.lua [REPS]: what the sampling profiler costs a
-- program, by rate and stack depth (run by bench/profiler_depth).
--
-- Three workloads: a stack overflow (about 200,000 frames, caught by
-- pcall), a recursion 190,000 frames deep that works at its bottom, and the
-- same work on a shallow stack.  Each runs without the profiler and with it
-- at each rate, the modes back to back in every round, order alternating;
-- a ratio is the CPU time (os.clock) with the profiler over the time
-- without it in the same round, and the table gives the median and the
-- largest over REPS rounds (default 5); bench/stats.lua interleaves them.  The profiler's pacing keeps the
-- program at least about half of its thread's time, so no ratio should
-- pass 2, whatever the rate and the depth.

package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path

local Profiler = require("perfmon.profiler")
local stats = require("stats")

local reps = tonumber(arg[1] or 5)
assert(reps and reps >= 1 and reps == math.floor(reps),
  "bench/profiler_depth.lua: REPS must be a positive integer")

local RATES = { 1000, 100, 50, 20, 10 }

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local function overflow(n) return 1 + overflow(n + 1) end
local function deep(n)
  if n == 0 then local r = spin(1e7) return r end
  return deep(n - 1) + 1
end

local WORKLOADS = {
  { name = "overflow", run = function() assert(not pcall(overflow, 1)) end },
  { name = "deep 190k", run = function() deep(190000) end },
  { name = "shallow", run = function() spin(2e7) end },
}

-- The CPU time of one run of w, under a profiler at rate (nil: none).
local function time(w, rate)
  local p = rate and Profiler.new()
  collectgarbage()
  local t0 = os.clock()
  if p then p:start(rate) end
  w.run()
  if p then p:stop() end
  return os.clock() - t0
end

print(("profiler cost by rate and depth: CPU time with / without, median (max) of %d rounds"):format(reps))
io.write(("%-10s %9s"):format("workload", "none s"))
for _, rate in ipairs(RATES) do io.write(("%16s"):format(rate .. " µs")) end
io.write("\n")
-- the modes of a round: no profiler, then each rate
local MODES = { "none" }
for i, rate in ipairs(RATES) do MODES[i + 1] = rate end

for _, w in ipairs(WORKLOADS) do
  local times = stats.interleave(MODES, reps, function(mode)
    return time(w, mode ~= "none" and mode or nil)
  end)
  io.write(("%-10s %9.3f"):format(w.name, stats.median(times.none)))
  for _, rate in ipairs(RATES) do
    local rs = {}
    for round, t in ipairs(times[rate]) do rs[round] = t / times.none[round] end
    io.write(("%16s"):format(("%.2f (%.2f)"):format(stats.median(rs), stats.max(rs))))
  end
  io.write("\n")
end
