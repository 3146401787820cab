--- perfmon.busted: which test, and which module under test, spends the CPU
-- time of a busted run.
--
-- As an output handler (`busted --lua=lua5.4 -o perfmon.busted`) it wraps
-- busted's usual handler, so the usual output stays, and adds a perfmon
-- report after it.  Each test is one perfmon event; the code of a spec file
-- that runs outside its tests (describe bodies, setup, before_each,
-- after_each, teardown) runs in events of its own, charged to the file.
-- Each spec file is a group by source, and so is each module directory
-- (`src/`, `lua/<module>/`).  Options come through `-Xoutput`:
--
--   --wrap=HANDLER   the handler whose output stays (busted's default)
--   --top=N          how many of the slowest tests to list (10)
--   --json=PATH      write the report as JSON to PATH (none)
--   --budget-ms=MS   fail every test that spends more than MS ms of CPU
--   --modules=A:B    the module prefixes, instead of src/ and lua/<module>/
--
-- Options that do not begin with "--" go to the wrapped handler (junit's
-- file name).  Required at all (as handler or as `--helper`), it registers
-- `assert.cpu_under(ms, fn)` and `assert.no_jank(fn)` with luassert.
--
-- A test's CPU time is the difference of the process's `cpu_us` between
-- snapshots taken just before its event begins and just after it ends:
-- the thread's CPU clock, which the group figures are shares of, so a
-- module never spends more than its test; os.clock would count every
-- thread of the process and read another clock.
--
-- A test's time is counted up to the end of its function, so that going
-- over the budget fails the test itself: a `finally` runs after, charged
-- to the file.
--
-- Tests that use perfmon themselves: their monitors are theirs (probes are
-- counted per monitor).  While a test holds an event of its own
-- (perfmon.event, event_begin: this module replaces the three functions
-- of the perfmon table with ones that behave the same outside a test),
-- the test's event is suspended: ended before theirs begins, begun again
-- after theirs ends, and the test's CPU time counts theirs too.  An event the test leaves open is
-- ended at the test's end, and the test is marked (`note`).

local perfmon = require("perfmon")
local args = require("perfmon.args")
local text = require("perfmon.text")

local M = {}

local JANK_US = 64000 -- Firefox's jank threshold, the watcher's default

----------------------------------------------------------------------------
-- Events: the test's (or the file's) event, suspended around the events
-- the code under test opens itself
----------------------------------------------------------------------------

local raw_begin, raw_end, raw_event = perfmon.event_begin, perfmon.event_end, perfmon.event

local mon             -- the run's monitor (or the helper's), opened once
local current         -- the record (test or file) whose event is open
local suspended       -- the record whose event a program's event suspended
local user_depth = 0  -- events the program under test holds

local raw_snapshot, raw_state_snapshot = nil, perfmon.snapshot
local program_snapshot -- the monitors' method while a run goes on (below)

local function monitor()
  if not mon then
    mon = perfmon.monitor{ "jank", "ticks" }
    -- every monitor's method: the program's snapshots are wrapped below
    local Monitor = getmetatable(mon)
    raw_snapshot = raw_snapshot or Monitor.snapshot
    Monitor.snapshot = program_snapshot
  end
  return mon
end

local function add_groups(into, d)
  for _, st in pairs(d.groups) do
    if st.cpu_us > 0 then
      local g = into[st.id]
      if not g then
        g = { name = st.name, kind = st.kind, cpu_us = 0, self_us = 0 }
        into[st.id] = g
      end
      g.cpu_us = g.cpu_us + st.cpu_us
      g.self_us = g.self_us + st.self_us
    end
  end
end

-- Opens rec's event (a new stretch of it).
local function open(rec)
  rec.snap = raw_snapshot(monitor())
  raw_begin()
  current = rec
end

-- Adds to rec what ran since its stretch opened: its own event, and the
-- events the program under test ran while rec's was suspended.
local function tally(rec)
  local d = raw_snapshot(mon):subtract(rec.snap)
  rec.cpu_us = rec.cpu_us + d.process.cpu_us
  add_groups(rec.groups, d)
end

-- Closes the event of the current record and adds what it spent.
local function close()
  local rec = current
  current = nil
  pcall(raw_end) -- the program may have ended it itself, through perfmon.core
  tally(rec)
  return rec
end

-- A suspension takes no snapshot (the program may run thousands of
-- events in one test): the stretch's snapshots count what it ran.
local function suspend()
  if current then
    raw_end()
    suspended, current = current, nil
  end
end

local function resume()
  if suspended and user_depth == 0 then
    current, suspended = suspended, nil
    raw_begin()
  end
end

local RESUME = setmetatable({}, { __close = function() resume() end })

-- perfmon's error for a misuse of the brackets, raised again at the
-- program's line: raised through this module, it would name this file (or
-- none, through pcall).  Any other error (the program's own, from fn)
-- goes on as it was raised.
local function misuse(err)
  local msg = type(err) == "string" and err:gsub("^[^\n]-busted%.lua:%d+: ", "")
  if not (msg and (msg:match("^event_%w+: ") or msg:match("^bad argument #%d+ to 'event"))) then
    error(err, 0)
  end
  error(msg, 3)
end

-- The program's own events: the same functions, behaving as perfmon's,
-- around which the current record's event is suspended.
perfmon.event_begin = function()
  local mine = current ~= nil
  if mine then suspend() end
  local ok, err = pcall(raw_begin)
  if not ok then -- nothing changed
    if mine then resume() end
    misuse(err)
  end
  user_depth = user_depth + 1
end

perfmon.event_end = function()
  -- the open event is the test's: the program has none to end
  if user_depth == 0 and current then error("event_end: no event is open", 2) end
  local ok, err = pcall(raw_end)
  if not ok then misuse(err) end
  if user_depth > 0 then user_depth = user_depth - 1 end
  resume()
end

-- Runs take with the test's event suspended, if one is open.
local function outside_test(take, ...)
  if not current then return take(...) end
  suspend()
  local _ <close> = RESUME
  return take(...)
end

perfmon.event = function(fn, ...)
  if user_depth > 0 then -- inside the program's own event: a misuse
    local r = table.pack(pcall(raw_event, fn, ...))
    if not r[1] then misuse(r[2]) end
    return table.unpack(r, 2, r.n)
  end
  -- checked here, as the core would: its error would name this module
  args.check_callable(fn, 1, "event")
  return outside_test(raw_event, fn, ...)
end

-- The program's snapshots, likewise: a snapshot inside an event leaves the
-- event out, so the test's is suspended around them, and they see the
-- test's work so far as they would without the handler.
program_snapshot = function(self)
  return outside_test(raw_snapshot, self)
end

perfmon.snapshot = function()
  return outside_test(raw_state_snapshot)
end

-- And the watcher's delivery, which waits for the open event to end.
local watcher = require("perfmon.watcher")
local raw_poll, raw_flush = watcher.poll, watcher.flush
watcher.poll = function() return outside_test(raw_poll) end
watcher.flush = function() return outside_test(raw_flush) end

----------------------------------------------------------------------------
-- Modules: the code under test, grouped by path
----------------------------------------------------------------------------

-- The default module prefixes: src/ and each lua/<module>/ under the
-- current directory.
local function default_modules()
  local pl_path, pl_dir = require("pl.path"), require("pl.dir")
  local mods = {}
  if pl_path.isdir("src") then mods[#mods + 1] = "src/" end
  if pl_path.isdir("lua") then
    local dirs = pl_dir.getdirectories("lua")
    table.sort(dirs)
    for _, d in ipairs(dirs) do
      mods[#mods + 1] = "lua/" .. pl_path.basename(d) .. "/"
    end
  end
  return mods
end

local modules -- the module groups, once made

-- The groups of the code under test, one per prefix (kind "module"), made
-- once: by the handler at the suite's start (with its --modules), or by
-- the first assertion when perfmon.busted is a helper only (the defaults).
local function module_groups(prefixes)
  if modules then return modules end
  modules = {}
  local cwd = require("pl.path").currentdir()
  for _, prefix in ipairs(prefixes or default_modules()) do
    local g = perfmon.group{ name = prefix, kind = "module" }
    modules[#modules + 1] = g
    perfmon.attach_source(prefix, g)
    if prefix:sub(1, 1) ~= "/" then
      -- require finds a module as ./lua/x.lua or /abs/lua/x.lua as often
      -- as lua/x.lua, by the search path that named it
      perfmon.attach_source("./" .. prefix, g)
      perfmon.attach_source(cwd .. "/" .. prefix, g)
    end
  end
  return modules
end

--- Sets the module prefixes the assertions group the code under test by,
-- instead of the defaults (src/ and lua/<module>/ under the current
-- directory), before the first assertion or run; {} groups none.  Returns
-- the module groups.
function M.modules(prefixes)
  if type(prefixes) ~= "table" then
    args.error(1, "modules", "table expected, got " .. type(prefixes))
  end
  for i, p in ipairs(prefixes) do
    if type(p) ~= "string" or p == "" then
      args.error(1, "modules",
        ("prefixes expected: index %d is %s"):format(i, p == "" and "empty" or type(p)))
    end
  end
  return module_groups(prefixes)
end

----------------------------------------------------------------------------
-- Assertions: assert.cpu_under(ms, fn), assert.no_jank(fn)
----------------------------------------------------------------------------

local function ms(us) return ("%.1f"):format(us / 1000) end

-- The group that spent the most of d itself (self time: the spec file
-- that called a module is charged the module's time only inclusively).
local function top_group(groups)
  local best
  for _, g in pairs(groups) do
    if g.self_us > 0 and (not best or g.self_us > best.self_us) then best = g end
  end
  return best
end

local function describe_top(groups)
  local g = top_group(groups)
  if not g then return "no group spent it (the time was spent outside every group)" end
  return ("%s '%s' spent %s ms itself"):format(g.kind, g.name, ms(g.self_us))
end

--- Runs fn as one perfmon event; returns its CPU µs and the groups that
-- spent it ({ [id] = {name, kind, cpu_us, self_us} }).
function M.measure(fn)
  suspend()
  local _ <close> = RESUME
  -- outside a run, a monitor of its own, closed after: a spec that checks
  -- that no monitor is open must not find this one
  local own <close> = not mon and perfmon.monitor{ "jank" } or nil
  local m = mon or own
  module_groups()
  local before = m:snapshot()
  raw_event(fn)
  local d = m:snapshot():subtract(before)
  local groups = {}
  add_groups(groups, d)
  return d.process.cpu_us, groups
end

local function register_assertions()
  local ok, say = pcall(require, "say")
  local ok2, luassert = pcall(require, "luassert")
  if not (ok and ok2) then return end
  say:set("assertion.perfmon.positive", "%s")
  say:set("assertion.perfmon.negative", "%s")

  local function message(arguments, msg)
    arguments[1], arguments.n, arguments.nofmt = msg, 1, { true }
  end

  luassert:register("assertion", "cpu_under", function(state, arguments)
    local limit, fn = arguments[1], arguments[2]
    if type(limit) ~= "number" or limit <= 0 then
      error("bad argument #1 to 'cpu_under' (positive number of ms expected, got "
        .. tostring(limit) .. ")", 4)
    end
    if type(fn) ~= "function" then
      error("bad argument #2 to 'cpu_under' (function expected, got " .. type(fn) .. ")", 4)
    end
    local us, groups = M.measure(fn)
    local under = us < limit * 1000
    message(arguments, (under and "Expected more than %s ms of CPU, spent %s ms; %s"
      or "Expected under %s ms of CPU, spent %s ms; %s")
      :format(ms(limit * 1000), ms(us), describe_top(groups)))
    return under
  end, "assertion.perfmon.positive", "assertion.perfmon.negative")

  luassert:register("assertion", "no_jank", function(state, arguments)
    local fn = arguments[1]
    if type(fn) ~= "function" then
      error("bad argument #1 to 'no_jank' (function expected, got " .. type(fn) .. ")", 4)
    end
    local us, groups = M.measure(fn)
    local smooth = us < JANK_US
    message(arguments, ("Expected %s jank (%s ms of CPU in one event), spent %s ms; %s")
      :format(smooth and "a" or "no", ms(JANK_US), ms(us), describe_top(groups)))
    return smooth
  end, "assertion.perfmon.positive", "assertion.perfmon.negative")
end

register_assertions()

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
  local by_element = {}
  local file_rec
  local start_snap

  local function suite_start()
    monitor()
    run.modules = module_groups(opts.modules)
    start_snap = raw_snapshot(mon)
    return nil, true
  end

  local function file_start(element)
    local g = perfmon.group{ name = element.name, kind = "spec" }
    perfmon.attach_source(element.name, g)
    file_rec = { name = element.name, cpu_us = 0, groups = {} }
    run.files[#run.files + 1] = file_rec
    open(file_rec)
    return nil, true
  end

  local function file_end()
    if current == file_rec then close() end
    file_rec = nil
    return nil, true
  end

  -- Ends the test's event (and any the test left open) and opens the
  -- file's again; checks the budget.
  local function finish(rec)
    if rec.finished then return end
    rec.finished = true
    if user_depth > 0 then
      rec.note = "the test left a perfmon event open; it was ended at the test's end"
      while user_depth > 0 do pcall(raw_end); user_depth = user_depth - 1 end
    end
    if suspended == rec then
      suspended = nil
      tally(rec)
    elseif current == rec then
      close()
    end
    rec.jank = rec.cpu_us >= JANK_US
    local top = top_group(rec.groups)
    rec.top = top and top.name
    if file_rec and not current then open(file_rec) end
    if opts.budget_us and rec.cpu_us > opts.budget_us then
      rec.over_budget = true
      return ("perfmon.busted: %s ms of CPU, over the budget of %s ms; %s")
        :format(ms(rec.cpu_us), ms(opts.budget_us), describe_top(rec.groups))
    end
  end

  local function test_start(element)
    if current then close() end -- the file's event
    local rec = { name = full_name(busted, element), file = file_of(busted, element),
                  cpu_us = 0, groups = {}, status = "running" }
    run.tests[#run.tests + 1] = rec
    by_element[element] = rec
    if element.descriptor == "it" then
      element.perfmon_run = element.perfmon_run or element.run
      local orig = element.perfmon_run
      element.run = function(...)
        orig(...)
        local over = finish(rec)
        if over then busted.fail(over, 0) end
      end
    end
    open(rec)
    return nil, true
  end

  local function test_end(element, parent, status)
    local rec = by_element[element]
    if rec then
      by_element[element] = nil
      finish(rec)
      rec.status = status
      if element.perfmon_run then element.run = element.perfmon_run end
    end
    return nil, true
  end

  local function report()
    local d = raw_snapshot(mon):subtract(start_snap)
    local tests = {}
    for i, t in ipairs(run.tests) do tests[i] = t end
    table.sort(tests, function(a, b) return a.cpu_us > b.cpu_us end)
    local out = {}
    local function say(...) out[#out + 1] = string.format(...) end
    say("\nperfmon: the %d slowest tests (CPU ms, the thread's CPU time in the test)", math.min(opts.top, #tests))
    for i = 1, math.min(opts.top, #tests) do
      local t = tests[i]
      say("%9s  %-8s %s%s", ms(t.cpu_us), t.status, t.name,
        t.top and (" [" .. t.top .. "]") or "")
    end
    say("perfmon: CPU ms per module over the run (self: its own code; inclusive: with what it calls)")
    say("%9s  %9s", "self", "inclusive")
    for _, g in ipairs(run.modules) do
      local st = d.groups[g.id]
      say("%9s  %9s  %s", ms(st and st.self_us or 0), ms(st and st.cpu_us or 0), g.name)
    end
    local janked = {}
    for _, t in ipairs(tests) do if t.jank then janked[#janked + 1] = t end end
    say("perfmon: tests that janked (>= %s ms of CPU in one test): %s", ms(JANK_US),
      #janked == 0 and "none" or "")
    for _, t in ipairs(janked) do say("%9s  %s", ms(t.cpu_us), t.name) end
    if opts.budget_us then
      local n = 0
      for _, t in ipairs(tests) do if t.over_budget then n = n + 1 end end
      say("perfmon: %d tests over the budget of %s ms", n, ms(opts.budget_us))
    end
    io.write(table.concat(out, "\n"), "\n")
    io.flush()

    if opts.json then
      local jt, jf, jm = text.array(), text.array(), text.array()
      for _, t in ipairs(tests) do
        jt[#jt + 1] = { name = t.name, file = t.file, status = t.status, cpu_us = t.cpu_us,
          jank = t.jank, over_budget = t.over_budget == true, top_group = t.top,
          note = t.note, groups = json_groups(t.groups) }
      end
      for _, f in ipairs(run.files) do
        jf[#jf + 1] = { name = f.name, cpu_us = f.cpu_us, groups = json_groups(f.groups) }
      end
      for _, g in ipairs(run.modules) do
        local st = d.groups[g.id]
        jm[#jm + 1] = { name = g.name, cpu_us = st and st.cpu_us or 0,
          self_us = st and st.self_us or 0 }
      end
      local f = assert(io.open(opts.json, "w"))
      f:write(text.json{ tests = jt, files = jf, modules = jm,
        budget_us = opts.budget_us, jank_us = JANK_US, cpu_us = d.process.cpu_us }, "\n")
      f:close()
    end
    return nil, true
  end

  local handler = {}
  function handler:subscribe(sub_options)
    inner:subscribe(inner_options)
    busted.subscribe({ "suite", "start" }, suite_start, { priority = 1 })
    busted.subscribe({ "file", "start" }, file_start)
    busted.subscribe({ "file", "end" }, file_end, { priority = 1 })
    -- the test's event begins after every other handler's start, and
    -- ends before theirs: their work is charged to no test
    busted.subscribe({ "test", "start" }, test_start)
    busted.subscribe({ "test", "end" }, test_end, { priority = 1 })
    busted.subscribe({ "suite", "end" }, report)
  end
  return handler
end

return setmetatable(M, { __call = function(_, options) return new_handler(options) end })
