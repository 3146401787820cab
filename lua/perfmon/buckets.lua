-- perfmon.buckets: a snapshot's histograms of event durations as text, for
-- the about:performance tables hosts show.  durations[k] counts the events
-- of at least 2^(k-1) ms (k = 1..10): each count includes those above it,
-- and the last has no upper bound (an event of 27 s is in it), so it reads
-- ">= 512 ms".

local arg_error = require("perfmon.args").error

local buckets = {}

--- The core's number of buckets (PM_DURATIONS): the last is open-ended.
buckets.count = 10

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

--- Bucket k as "lo-hi ms", "<1 ms" for 0, ">= lo ms" for the last.
function buckets.name(k)
  if math.type(k) ~= "integer" or k < 0 or k > buckets.count then
    arg_error(1, "perfmon.buckets.name", ("bucket number (integer 0..%d) expected, got %s")
      :format(buckets.count, math.type(k) and tostring(k) or type(k)))
  end
  if k == 0 then return "<1 ms" end
  if k == buckets.count then return (">= %d ms"):format(2 ^ (k - 1)) end
  return ("%d-%d ms"):format(2 ^ (k - 1), 2 ^ k)
end

--- Each bucket [2^(k-1), 2^k) ms on its own, as "lo-hi:n" pairs (the
-- last, open-ended, ">=lo:n"), so that the counts add up to the events;
-- "-" when there is none.
function buckets.histogram(durations)
  check_durations(durations, "perfmon.buckets.histogram")
  local parts = {}
  for k = 1, #durations do
    local n = durations[k] - (durations[k + 1] or 0)
    if n > 0 then
      parts[#parts + 1] = k == buckets.count and (">=%d:%d"):format(2 ^ (k - 1), n)
        or ("%d-%d:%d"):format(2 ^ (k - 1), 2 ^ k, n)
    end
  end
  return #parts > 0 and table.concat(parts, " ") or "-"
end

return buckets
