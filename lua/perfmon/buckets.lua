-- perfmon.buckets: a snapshot's histograms of event durations as text, for
-- the about:performance tables hosts show.  durations[k] counts the events
-- of at least 2^(k-1) ms (k = 1..10): each count includes those above it,
-- and the top one has no upper bound (an event of 27 s is in it).

local core = require("perfmon.loader")
local module = require("perfmon.module")
local arg_error = require("perfmon.args").error

local buckets = {}

--- The histograms' number of buckets, as the core lists its figures
-- (PM_DURATIONS): the top one is open-ended.
for _, f in ipairs(core.figures) do
  if f.kind == "histogram" then buckets.count = f.buckets end
end
local TOP = buckets.count

-- A histogram (a group's durations or self_durations) at argument 1.
local function check_durations(durations, fname)
  if type(durations) ~= "table" then
    arg_error(1, fname, "durations histogram expected, got " .. type(durations), 2)
  end
  for k = 1, #durations do -- counts: integers, or floats read from JSON
    if type(durations[k]) ~= "number" then
      arg_error(1, fname, ("durations histogram expected, its [%d] is %s")
        :format(k, type(durations[k])), 2)
    end
  end
end

--- The largest k with a count: the bucket of the longest event; 0 when
-- there is none (no event of 1 ms or more).
function buckets.longest(durations)
  check_durations(durations, "perfmon.buckets.longest")
  for k = #durations, 1, -1 do
    if durations[k] > 0 then return k end
  end
  return 0
end

--- Bucket k as "lo-hi ms", "<1 ms" for 0, and the top one, which has no
-- upper bound, as ">= 512 ms".
function buckets.name(k)
  if math.type(k) ~= "integer" or k < 0 or k > TOP then
    arg_error(1, "perfmon.buckets.name", ("bucket number (integer 0..%d) expected, got %s")
      :format(TOP, math.type(k) and tostring(k) or type(k)))
  end
  if k == 0 then return "<1 ms" end
  if k == TOP then return (">= %d ms"):format(2 ^ (k - 1)) end
  return ("%d-%d ms"):format(2 ^ (k - 1), 2 ^ k)
end

--- Each bucket [2^(k-1), 2^k) ms on its own, as "lo-hi:n" pairs, so that
-- the counts add up to the events, the top one as ">=512:n"; "-" when
-- there is none.
function buckets.histogram(durations)
  check_durations(durations, "perfmon.buckets.histogram")
  local parts = {}
  for k = 1, #durations do
    local n = durations[k] - (durations[k + 1] or 0)
    if n > 0 then
      parts[#parts + 1] = k == TOP and (">=%d:%d"):format(2 ^ (k - 1), n)
        or ("%d-%d:%d"):format(2 ^ (k - 1), 2 ^ k, n)
    end
  end
  return #parts > 0 and table.concat(parts, " ") or "-"
end

return module(buckets)
