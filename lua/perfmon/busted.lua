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
--   --mode=MODE      the run's monitor: exact (the default: the call/return
--                    hook) or sampled (the groups by samples, cheaper)
--   --rate-us=US     sampled: µs of CPU time between two samples (1000)
--
-- Options that do not begin with "--" go to the wrapped handler (junit's
-- file name).  Required at all (as handler or as `--helper`), it registers
-- `assert.cpu_under(ms, fn)` and `assert.no_jank(fn)` with luassert
-- (busted/assertions.lua).
--
-- This file is the handler: busted's events, and what each does.  Its
-- rooms: busted/options.lua (the options), busted/ledger.lua (the
-- bookkeeping: which test or file each stretch of CPU time goes to),
-- busted/groups.lua (the groups), busted/leftovers.lua (what a test leaves
-- open), busted/budget.lua (--budget-ms), busted/report.lua (the report).
-- The run is cut into stretches, each charged to a test or a spec file.
-- A test's stretch runs from its start to its end (its function and a
-- `finally`); before_each and after_each are the file's.  With a budget,
-- it ends with the test's function, so that going over the budget fails
-- the test itself, and the `finally` is the file's.  What a test leaves
-- open (an event, a nested loop, a monitor) is closed with it and noted.

local module = require("perfmon.module")
local perfmon = require("perfmon")
local assertions = require("perfmon.busted.assertions")
local budget = require("perfmon.busted.budget")
local groups = require("perfmon.busted.groups")
local ledger = require("perfmon.busted.ledger")
local leftovers = require("perfmon.busted.leftovers")
local options = require("perfmon.busted.options")
local report = require("perfmon.busted.report")

local M = {}

M.modules = groups.set
M.measure = assertions.measure
M.parse_options = options.parse
assertions.register()

local function load_handler(name, opts)
  local ok, h = pcall(require, "busted.outputHandlers." .. name)
  if not ok then
    if name:match("%.lua$") then ok, h = pcall(dofile, name) else ok, h = pcall(require, name) end
  end
  if not ok then error(("perfmon.busted: cannot load the handler to wrap '%s': %s"):format(name, h), 0) end
  return h(opts)
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

----------------------------------------------------------------------------
-- The handler: one run, its records and the current file
----------------------------------------------------------------------------

local Handler = {}
Handler.__index = Handler

function Handler:suite_start()
  self.run.module_groups = groups.modules(self.opts.modules)
  self.ledger = ledger.open(self.opts.mode,
    self.opts.mode == "sampled" and (self.opts.rate_us or 1000) or nil)
  self.run.mode, self.run.rate_us = self.ledger.mon.mode, self.ledger.mon.rate_us
end

function Handler:file_start(element)
  self.file_group = groups.spec(element.name)
  self.file = ledger.record{ name = element.name, monitors = leftovers.count().monitors }
  local files = self.run.files
  files[#files + 1] = self.file
  self.ledger:switch(self.file)
end

-- the file's group dies with it: the totals list the groups alive
function Handler:file_end()
  self.ledger:switch(nil)
  self.file.note = leftovers.file_monitors(self.file.monitors)
  groups.drop_spec(self.file_group)
  self.file, self.file_group = nil, nil
end

function Handler:test_start(element)
  local rec = ledger.record{ name = full_name(self.busted, element), file = self.file.name,
    status = "running", file_rec = self.file, leftovers = leftovers.count() }
  local tests = self.run.tests
  tests[#tests + 1] = rec
  self.by_element[element] = rec
  if self.budget and element.descriptor == "it" then budget.wrap(self.budget, element, rec) end
  self.ledger:switch(rec)
end

-- Ends a test's stretch (once): charges it, closes and notes what it
-- left open, and returns the message of its budget failure, if over.
function Handler:finish(rec)
  if rec.finished then return end
  rec.finished = true
  local notes = leftovers.end_open(rec.leftovers)
  if self.ledger:switch(rec.file_rec) and not self.run.hook_lost then
    self.run.hook_lost = rec.name
    notes[#notes + 1] = "perfmon's hook was taken from a thread during the test"
  end
  rec.note = leftovers.sweep_monitors(rec.leftovers, notes)
  rec.jank = rec.cpu_us >= report.JANK_US
  rec.top = report.top_group(rec.groups)
  local limit = self.opts.budget_us
  if limit and rec.cpu_us > limit then
    rec.over_budget = true
    return ("perfmon.busted: %s ms of CPU, over the budget of %s ms; %s")
      :format(report.ms(rec.cpu_us), report.ms(limit), report.describe_top(rec.groups))
  end
end

-- a test ends its stretch here, unless its budget's runner ended it
function Handler:test_end(element, _, status)
  local rec = self.by_element[element]
  if not rec then return end
  self.by_element[element] = nil
  self:finish(rec)
  rec.status = status
  if rec.test then budget.unwrap(element, rec) end
end

function Handler:failed(element, _, message, trace)
  local rec = self.by_element[element]
  if rec and rec.test then budget.trim(self.budget, element, message, trace) end
end

function Handler:suite_end()
  local run = self.run
  local spent
  run.cpu_us, spent = self.ledger:total()
  for _, g in ipairs(run.module_groups) do
    local st = spent[g.id] or { cpu_us = 0, self_us = 0 }
    run.modules[#run.modules + 1] = { name = g.name, cpu_us = st.cpu_us, self_us = st.self_us }
  end
  -- the reads of the run check the hook of the threads they run on; the
  -- others' are checked here, once
  if not run.hook_lost and perfmon.info().hook_lost then run.hook_lost = true end
  report.write(run, self.opts)
end

----------------------------------------------------------------------------
-- busted's events
----------------------------------------------------------------------------

-- The handler's methods as busted's subscribers: each returns busted's
-- "go on".
local function on(handler, method)
  local f = Handler[method]
  return function(...)
    f(handler, ...)
    return nil, true
  end
end

local function new_handler(busted_options)
  local busted = require("busted")
  local ok, opts, rest = pcall(options.parse, busted_options.arguments)
  if not ok then
    io.stderr:write(opts, "\n")
    os.exit(1)
  end
  local inner_options = setmetatable({ arguments = rest }, { __index = busted_options })
  local inner = load_handler(opts.wrap or busted_options.defaultOutput or "utfTerminal", inner_options)
  local h = setmetatable({ busted = busted, opts = opts, by_element = {},
    run = { tests = {}, files = {}, modules = {} } }, Handler)
  if opts.budget_us then h.budget = budget.new(function(rec) return h:finish(rec) end) end

  local subscriber = {}
  function subscriber.subscribe(_)
    inner:subscribe(inner_options)
    busted.subscribe({ "suite", "start" }, on(h, "suite_start"), { priority = 1 })
    busted.subscribe({ "file", "start" }, on(h, "file_start"))
    busted.subscribe({ "file", "end" }, on(h, "file_end"), { priority = 1 })
    -- a test's stretch begins after every other handler's start, and
    -- ends before their end: their work is the file's
    busted.subscribe({ "test", "start" }, on(h, "test_start"))
    busted.subscribe({ "test", "end" }, on(h, "test_end"), { priority = 1 })
    busted.subscribe({ "failure", "it" }, on(h, "failed"), { priority = 1 })
    busted.subscribe({ "error", "it" }, on(h, "failed"), { priority = 1 })
    busted.subscribe({ "suite", "end" }, on(h, "suite_end"))
  end
  return subscriber
end

return module(setmetatable(M, { __call = function(_, busted_options) return new_handler(busted_options) end }))
