--- perfmon.busted: which test, and which module under test, spends the CPU
-- time of a busted run.
--
-- As an output handler (`busted --lua=lua5.4 -o perfmon.busted`) it wraps
-- busted's usual handler, so the usual output stays, and adds a perfmon
-- report after it (busted/report.lua).  Options come through `-Xoutput`:
--
--   --wrap=HANDLER   the handler whose output stays (busted's default)
--   --top=N          how many of the slowest tests to list (10)
--   --json=PATH      write the report as JSON to PATH (none)
--   --budget-ms=MS   fail every test that spends more than MS ms of CPU
--   --modules=A:B    the module prefixes, instead of src/ and lua/<module>/
--
-- Options that do not begin with "--" go to the wrapped handler (junit's
-- file name).  Required at all (as handler or as `--helper`), it registers
-- `assert.cpu_under(ms, fn)` and `assert.no_jank(fn)` with luassert
-- (busted/assertions.lua).
--
-- The run is cut into stretches, each charged to a test or a spec file
-- (busted/ledger.lua; the groups: busted/groups.lua; what a test leaves
-- open: busted/leftovers.lua).  A test's stretch
-- runs from its start to its end (its function and a `finally`);
-- before_each and after_each are the file's.  With a budget, it ends
-- with the test's function, so that going over the budget fails the test
-- itself, and the `finally` is the file's.  What a test leaves open (an
-- event, a nested loop, a monitor) is closed with it and noted.

local assertions = require("perfmon.busted.assertions")
local groups = require("perfmon.busted.groups")
local ledger = require("perfmon.busted.ledger")
local leftovers = require("perfmon.busted.leftovers")
local report = require("perfmon.busted.report")

local M = {}

M.modules = groups.set
M.measure = assertions.measure
assertions.register()

----------------------------------------------------------------------------
-- Options
----------------------------------------------------------------------------

local USAGE = "--wrap=HANDLER, --top=N, --json=PATH, --budget-ms=MS, --modules=A:B"

local function bad(option, msg)
  error(("perfmon.busted: bad option '%s' (%s)"):format(option, msg), 3)
end

--- Reads the -Xoutput options (a list of strings); returns the options
-- and the list of those for the wrapped handler.
function M.parse_options(list)
  local opts, rest = { top = 10 }, {}
  for _, a in ipairs(list or {}) do
    local key, value = a:match("^%-%-([%w-]+)=(.*)$")
    if not key and a:sub(1, 2) == "--" then
      bad(a, "expected --name=value; options: " .. USAGE)
    elseif not key then
      rest[#rest + 1] = a
    elseif key == "wrap" then
      if value == "" then bad(a, "a handler name expected") end
      opts.wrap = value
    elseif key == "top" then
      local n = math.tointeger(tonumber(value))
      if not n or n < 0 then bad(a, "a whole number >= 0 expected") end
      opts.top = n
    elseif key == "json" then
      if value == "" then bad(a, "a file path expected") end
      opts.json = value
    elseif key == "budget-ms" then
      local n = tonumber(value)
      if not n or n <= 0 or n ~= n or n == math.huge then
        bad(a, "a positive number of ms expected")
      end
      opts.budget_us = n * 1000
    elseif key == "modules" then
      local mods = {}
      for p in value:gmatch("[^:]+") do mods[#mods + 1] = p end
      if #mods == 0 then bad(a, "a list of path prefixes separated by ':' expected") end
      opts.modules = mods
    else
      bad(a, "unknown option; options: " .. USAGE)
    end
  end
  return opts, rest
end

----------------------------------------------------------------------------
-- The output handler
----------------------------------------------------------------------------

local function load_handler(name, options)
  local ok, h = pcall(require, "busted.outputHandlers." .. name)
  if not ok then
    if name:match("%.lua$") then ok, h = pcall(dofile, name) else ok, h = pcall(require, name) end
  end
  if not ok then error(("perfmon.busted: cannot load the handler to wrap '%s': %s"):format(name, h), 0) end
  return h(options)
end

local function full_name(busted, element)
  local names = { element.name or element.descriptor }
  local parent = busted.parent(element)
  while parent and (parent.name or parent.descriptor) and parent.descriptor ~= "file" do
    table.insert(names, 1, parent.name or parent.descriptor)
    parent = busted.parent(parent)
  end
  return table.concat(names, " ")
end

local function file_of(busted, element)
  local parent = busted.parent(element)
  while parent and parent.descriptor ~= "file" do parent = busted.parent(parent) end
  return parent and parent.name
end

-- The spec's own position of a test, for a failure the handler raises.
local function where(element)
  local t = element.trace
  return t and t.short_src and ("%s:%d: "):format(t.short_src, t.currentline) or ""
end

-- Ends a test's stretch (once): charges it, closes and notes what it
-- left open, and returns the message of its budget failure, if over.
local function finish(run, rec, opts)
  if rec.finished then return end
  rec.finished = true
  local notes = leftovers.end_open(rec.leftovers)
  run.ledger:switch(rec.file_rec)
  rec.note = leftovers.sweep_monitors(rec.leftovers, notes)
  rec.jank = rec.cpu_us >= report.JANK_US
  rec.top = report.top_group(rec.groups)
  if opts.budget_us and rec.cpu_us > opts.budget_us then
    rec.over_budget = true
    return ("perfmon.busted: %s ms of CPU, over the budget of %s ms; %s")
      :format(report.ms(rec.cpu_us), report.ms(opts.budget_us), report.describe_top(rec.groups))
  end
end

-- A traceback line of the budget's runner (below), cut from tracebacks.
local RUNNER_LINE = "\n[^\n]*" .. debug.getinfo(1, "S").short_src:gsub("%p", "%%%0") .. ":%d+: in [^\n]*"

local function new_handler(options)
  local busted = require("busted")
  local ok, opts, rest = pcall(M.parse_options, options.arguments)
  if not ok then
    io.stderr:write(opts, "\n")
    os.exit(1)
  end
  local inner_options = setmetatable({ arguments = rest }, { __index = options })
  local inner = load_handler(opts.wrap or options.defaultOutput or "utfTerminal", inner_options)

  local run = { tests = {}, files = {}, modules = {} }
  local by_element = {}  -- the record of each test under way
  local failures = {}    -- the budget failures raised: message -> test
  local file_rec

  local function suite_start()
    run.module_groups = groups.modules(opts.modules)
    run.ledger = ledger.open()
    return nil, true
  end

  local file_group
  local function file_start(element)
    file_group = groups.spec(element.name)
    file_rec = ledger.record{ name = element.name, monitors = leftovers.count().monitors }
    run.files[#run.files + 1] = file_rec
    run.ledger:switch(file_rec)
    return nil, true
  end

  -- the file's group dies with it: a read of the totals costs in
  -- proportion to the groups alive, and every boundary takes one
  local function file_end()
    run.ledger:switch(nil)
    file_rec.note = leftovers.file_monitors(file_rec.monitors)
    groups.drop_spec(file_group)
    file_rec, file_group = nil, nil
    return nil, true
  end

  -- With a budget, the test's function and then the budget's check: the
  -- test fails itself when over.  The function is called through an
  -- expression, so that Lua names its frame as busted's call would
  -- (`in function <spec/x_spec.lua:12>`); the runner's own frame is cut
  -- from the tracebacks (trim, below).
  local function runner(element, rec)
    local test = rec.test
    return function()
      (rec.test or test)()
      local over = finish(run, rec, opts)
      if over then
        local msg = where(element) .. over
        failures[msg] = rec
        busted.fail(msg, 0)
      end
    end
  end

  local function test_start(element)
    local rec = ledger.record{ name = full_name(busted, element), file = file_of(busted, element),
      status = "running", file_rec = file_rec }
    rec.leftovers = leftovers.count()
    run.tests[#run.tests + 1] = rec
    by_element[element] = rec
    if opts.budget_us and element.descriptor == "it" then
      rec.test = element.run
      element.run = runner(element, rec)
    end
    run.ledger:switch(rec)
    return nil, true
  end

  -- a test ends its stretch here, unless its budget's runner ended it
  local function test_end(element, _, status)
    local rec = by_element[element]
    if rec then
      by_element[element] = nil
      finish(run, rec, opts)
      rec.status = status
      if rec.test then element.run = rec.test end
    end
    return nil, true
  end

  -- A test's failure or error under a budget: the runner's frame is cut
  -- from its traceback, and a budget failure, the test's as a whole,
  -- points at the test's line with no traceback.
  local function trim(element, _, message, trace)
    if by_element[element] and by_element[element].test and type(trace) == "table"
        and type(trace.traceback) == "string" then
      if failures[message] then
        trace.short_src, trace.currentline = element.trace.short_src, element.trace.currentline
        trace.traceback = ""
      else
        trace.traceback = trace.traceback:gsub(RUNNER_LINE, "")
      end
    end
    return nil, true
  end

  local function suite_end()
    local spent
    run.cpu_us, spent = run.ledger:total()
    for _, g in ipairs(run.module_groups) do
      local st = spent[g.id] or { cpu_us = 0, self_us = 0 }
      run.modules[#run.modules + 1] = { name = g.name, cpu_us = st.cpu_us, self_us = st.self_us }
    end
    report.write(run, opts)
    return nil, true
  end

  local handler = {}
  function handler.subscribe(_)
    inner:subscribe(inner_options)
    busted.subscribe({ "suite", "start" }, suite_start, { priority = 1 })
    busted.subscribe({ "file", "start" }, file_start)
    busted.subscribe({ "file", "end" }, file_end, { priority = 1 })
    -- a test's stretch begins after every other handler's start, and
    -- ends before their end: their work is the file's
    busted.subscribe({ "test", "start" }, test_start)
    busted.subscribe({ "test", "end" }, test_end, { priority = 1 })
    busted.subscribe({ "failure", "it" }, trim, { priority = 1 })
    busted.subscribe({ "error", "it" }, trim, { priority = 1 })
    busted.subscribe({ "suite", "end" }, suite_end)
  end
  return handler
end

return setmetatable(M, { __call = function(_, options) return new_handler(options) end })
