--- perfmon.busted.report: the report perfmon.busted prints after busted's
-- output, and writes as JSON: the slowest tests, CPU per module, the tests
-- that janked and those over the budget; each column explained in a legend.

local module = require("perfmon.module")
local text = require("perfmon.text")

local M = {}

M.JANK_US = 64000 -- Firefox's jank threshold, the watcher's default

function M.ms(us) return ("%.1f"):format(us / 1000) end
local ms = M.ms

--- The group of groups ({ [id] = {name, kind, cpu_us, self_us} }) that
-- spent the most self time, or nil.
function M.top_group(groups)
  local best
  for _, g in pairs(groups) do
    if g.self_us > 0 and (not best or g.self_us > best.self_us) then best = g end
  end
  return best
end

--- The group that spent the most self time, in words, for a failure.
function M.describe_top(groups)
  local g = M.top_group(groups)
  if not g then return "no group spent it (the time was spent outside every group)" end
  return ("%s '%s' spent %s ms itself"):format(g.kind, g.name, ms(g.self_us))
end

local function group_list(groups)
  local list = {}
  for _, g in pairs(groups) do list[#list + 1] = g end
  table.sort(list, function(a, b) return a.cpu_us > b.cpu_us end)
  return list
end

local function json_groups(groups)
  local out = text.array()
  for _, g in ipairs(group_list(groups)) do
    out[#out + 1] = { name = g.name, kind = g.kind, cpu_us = g.cpu_us, self_us = g.self_us }
  end
  return out
end

-- What the columns and brackets mean, printed above them.
local LEGEND = {
  tests = {
    "perfmon: the %d slowest tests",
    "  CPU ms: the thread's CPU time from the test's start to its end (with --budget-ms,"
      .. " to the end of its function); before_each and after_each are its file's",
    "  [group: ms]: the module or spec file that spent the most of it itself (self time, below)",
  },
  modules = {
    "perfmon: CPU ms per module over the run",
    "  self: its own code, and the code of no group it calls (Lua's and C libraries,"
      .. " luassert, busted's helpers) until that calls into another module or spec file",
    "  inclusive: with everything it calls",
  },
}

--- The report as text lines.  run: { tests, files, modules, hook_lost =
-- the test at whose end the hook was found taken, or true (at the run's
-- end), or nil }; opts: busted/options.lua's.
function M.lines(run, opts)
  local tests = {}
  for i, t in ipairs(run.tests) do tests[i] = t end
  table.sort(tests, function(a, b) return a.cpu_us > b.cpu_us end)
  local out = {}
  local function say(...) out[#out + 1] = string.format(...) end
  local top = math.min(opts.top, #tests)
  say("\n" .. table.concat(LEGEND.tests, "\n"), top)
  if run.mode == "sampled" then
    say("  (--mode=sampled: the groups from samples of the stack every %d µs of CPU time,"
      .. " a test's share cut at its CPU time; the CPU ms stay the thread's clock)", run.rate_us)
  end
  for i = 1, top do
    local t = tests[i]
    say("%9s  %-8s %s%s", ms(t.cpu_us), t.status, t.name,
      t.top and (" [%s: %s]"):format(t.top.name, ms(t.top.self_us)) or "")
    if t.note then say("%9s  %-8s (%s)", "", "", t.note) end
  end
  for _, f in ipairs(run.files) do
    if f.note then say("perfmon: %s: %s", f.name, f.note) end
  end
  say("%s", table.concat(LEGEND.modules, "\n"))
  say("%9s  %9s", "self", "inclusive")
  for _, m in ipairs(run.modules) do
    say("%9s  %9s  %s", ms(m.self_us), ms(m.cpu_us), m.name)
  end
  local janked = {}
  for _, t in ipairs(tests) do if t.jank then janked[#janked + 1] = t end end
  say("perfmon: tests that janked (>= %s ms of CPU in one test): %s", ms(M.JANK_US),
    #janked == 0 and "none" or "")
  for _, t in ipairs(janked) do say("%9s  %s", ms(t.cpu_us), t.name) end
  if run.hook_lost then
    say("perfmon: perfmon's hook was taken from a thread%s: what that thread ran since is"
      .. " in the CPU time of the tests and files but in no group's",
      type(run.hook_lost) == "string" and (" during the test '%s'"):format(run.hook_lost) or "")
  end
  if opts.budget_us then
    local n = 0
    for _, t in ipairs(tests) do if t.over_budget then n = n + 1 end end
    say("perfmon: %d tests over the budget of %s ms", n, ms(opts.budget_us))
  end
  return out, tests
end

--- Prints the report, and writes it as JSON to opts.json if given.
function M.write(run, opts)
  local out, tests = M.lines(run, opts)
  io.write(table.concat(out, "\n"), "\n")
  io.flush()
  if not opts.json then return end
  local jt, jf, jm = text.array(), text.array(), text.array()
  for _, t in ipairs(tests) do
    jt[#jt + 1] = { name = t.name, file = t.file, status = t.status, cpu_us = t.cpu_us,
      jank = t.jank, over_budget = t.over_budget == true, top_group = t.top and t.top.name,
      note = t.note, groups = json_groups(t.groups) }
  end
  for _, f in ipairs(run.files) do
    jf[#jf + 1] = { name = f.name, cpu_us = f.cpu_us, note = f.note, groups = json_groups(f.groups) }
  end
  for _, m in ipairs(run.modules) do
    jm[#jm + 1] = { name = m.name, cpu_us = m.cpu_us, self_us = m.self_us }
  end
  local f = assert(io.open(opts.json, "w"))
  f:write(text.json{ tests = jt, files = jf, modules = jm,
    budget_us = opts.budget_us, jank_us = M.JANK_US, cpu_us = run.cpu_us,
    mode = run.mode, rate_us = run.rate_us,
    hook_lost = run.hook_lost ~= nil }, "\n")
  f:close()
end

return module(M)
