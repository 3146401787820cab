--- Checks against ground truth, shared by the specs.
-- A spec measures the truth itself (CPU busy loops timed with os.clock) and
-- asserts that perfmon charged the same, within a tolerance wide enough for
-- a shared, noisy machine and narrow enough to tell right from wrong.

local truth = {}

truth.TOLERANCE = 0.25 -- relative
truth.SLACK_US = 3000 -- absolute

--- Asserts that got_us is within 25% + 3 ms of want_us.
function truth.assert_near(got_us, want_us, what)
  local lo = want_us * (1 - truth.TOLERANCE) - truth.SLACK_US
  local hi = want_us * (1 + truth.TOLERANCE) + truth.SLACK_US
  assert(got_us >= lo and got_us <= hi,
    ("%s: charged %.1f ms, expected %.1f ms (%.1f .. %.1f)"):format(
      what or "cpu_us", got_us / 1000, want_us / 1000, lo / 1000, hi / 1000))
end

return truth
