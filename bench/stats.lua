--- bench/stats.lua: the benchmarks' statistics, for bench/run.lua,
-- bench/profiler_depth.lua, bench/preempt.lua and bench/busted.lua.
--
-- The machine is shared and its speed drifts by up to 2x over seconds, so
-- modes are timed side by side: interleave runs them back to back in
-- rounds, order reversed every other round, and paired compares two modes
-- over pairs of adjacent rounds, over which a linear drift cancels.

local stats = {}

--- The q-quantile of xs, interpolated between order statistics (q = 0.5 is
-- the median: the mean of the middle two of an even count).  xs is left
-- as it was.
function stats.quantile(xs, q)
  local s = table.move(xs, 1, #xs, 1, {})
  table.sort(s)
  local h = (#s - 1) * q + 1
  local lo = math.floor(h)
  if lo >= #s then return s[#s] end
  return s[lo] + (h - lo) * (s[lo + 1] - s[lo])
end

function stats.median(xs) return stats.quantile(xs, 0.5) end

function stats.mean(xs)
  local s = 0
  for _, x in ipairs(xs) do s = s + x / #xs end
  return s
end

--- The smallest of xs: the run that interference from other work
-- inflated least.
function stats.best(xs) return math.min(table.unpack(xs)) end

function stats.max(xs) return math.max(table.unpack(xs)) end

--- Runs `rounds` rounds, each timing every mode of the list `modes` once,
-- back to back, with time(mode): forward in odd rounds, reversed in even
-- ones, so that over a pair of adjacent rounds every mode's mean position
-- is the same.  Returns times[mode][round].
function stats.interleave(modes, rounds, time)
  local times = {}
  for _, m in ipairs(modes) do times[m] = {} end
  for r = 1, rounds do
    for i = 1, #modes do
      local m = modes[r % 2 == 1 and i or #modes + 1 - i]
      times[m][r] = time(m)
    end
  end
  return times
end

--- Mode a's time over mode b's, one ratio per pair of adjacent rounds: the
-- ratio of the pair's sums, which a speed drift linear over the pair scales
-- alike.  (Per-round ratios would alternate between two biases, and their
-- median could land anywhere between them.)
function stats.pair_ratios(times, a, b)
  local xs = {}
  for r = 2, #times[a], 2 do
    xs[#xs + 1] = (times[a][r - 1] + times[a][r]) / (times[b][r - 1] + times[b][r])
  end
  return xs
end

--- Median and quartiles of the per-pair ratios of a to b, and their count.
function stats.paired(times, a, b)
  local xs = stats.pair_ratios(times, a, b)
  return { median = stats.median(xs), q1 = stats.quantile(xs, 0.25),
           q3 = stats.quantile(xs, 0.75), n = #xs }
end

--- The interquartile range of a stats.paired result, as "q1-q3".
function stats.iqr(q) return ("%.2f-%.2f"):format(q.q1, q.q3) end

return stats
