--- perfmon.profiler: which function is slow.
--
-- The stopwatch says which group is slow; this sampling profiler says which
-- function.  The Profiler object of Mozilla's "JavaScript Profiling" API in
-- Lua terms: new, start, is_profiling, frame, results, samples, reset,
-- stop; and to_gecko, the profile the Firefox Profiler opens.
--
-- The C side samples (src/profiler/): a timer signal asks Lua for a sample
-- at the next instruction, a count hook (sampler.c, src/hook.c), and the
-- hook walks the stack into interned records (sample.c, records.c), which
-- core.profiler_dump reads out (lprofiler.c).  This module only shapes what
-- it recorded.
-- docs/profiler.md has the details.

local core = require("perfmon.loader")
local args = require("perfmon.args")

local arg_error = args.error

local Profiler = {}
Profiler.__index = Profiler

-- The profiler started last on this lua_State (weak: it may be dropped);
-- it runs until stopped, or forcibly stopped by the next one to start.
-- Its slot is made here, so that a start that succeeded cannot fail on
-- the memory to note it.
local last_started = setmetatable({ false }, { __mode = "v" })

local function check_running(self, fname)
  local state = core.profiler_state(self.core)
  if state ~= "running" then
    local why = state == "new" and "it was never started"
      or state == "forced" and "it was forcibly stopped: another profiler started on this lua_State"
      or "it was stopped"
    error(("%s: the profiler is not running (%s)"):format(fname, why), 3)
  end
end

-- A method called without its object (p.stop() for p:stop()) says so; fname is
-- the method as the API writes it.
local function check_profiler(self, fname)
  args.check_self(self, Profiler, fname, "profiler", 2)
end

----------------------------------------------------------------------------
-- Markers: jank alerts, when a monitor is open
----------------------------------------------------------------------------

-- The watcher's alerts are decided on self time (watcher.configure's
-- "time"), so a jank marker names the group whose own code janked, not
-- every group that was on the stack meanwhile.  A marker spans the event,
-- as far as the alert knows it: its inclusive time, up to its end.

local has_watcher, watcher = pcall(require, "perfmon.watcher")
if not has_watcher then watcher = nil end

-- Called by core.profiler_start once the profiler runs, when a monitor is
-- open (none: no alerts); if it raises, the profiler stops again.  The
-- listener is registered before it is kept in self.listener (a key made
-- by new(), so that the assignment cannot fail).
local function listen(self)
  if not watcher or self.listener then return end
  local markers = self.markers
  local listener = function(list)
    for _, alert in ipairs(list) do
      local d, s = alert.details, alert.source
      local length = d.reason == "blocking" and d.highest_blocking_us or d.highest_jank_us
      markers[#markers + 1] = {
        name = d.reason == "blocking" and "Blocking" or "Jank",
        start_us = d.time_us - (length or 0), end_us = d.time_us,
        group = s.name, group_id = s.id, kind = s.kind, reason = d.reason,
        highest_self_us = d.highest_self_us, highest_jank_us = d.highest_jank_us,
        highest_blocking_us = d.highest_blocking_us,
        visible = d.visible,
      }
    end
  end
  watcher.add_listener("*", listener)
  self.listener = listener
end

local function unlisten(self)
  if self.listener then
    watcher.remove_listener("*", self.listener)
    self.listener = false
  end
end

----------------------------------------------------------------------------
-- The object
----------------------------------------------------------------------------

--- A new profiler; it samples nothing until start().
function Profiler.new()
  return setmetatable({
    core = core.profiler_new(),
    data = {}, -- [node] = the table frame() returned for that stack
    markers = {}, -- jank alerts seen while running, as Gecko markers want them
    listener = false, -- the watcher listener that makes them, while running
  }, Profiler)
end

--- Begins profiling this lua_State: a sample every sample_rate_us of the
-- thread's CPU time (default 1000), at most max_samples kept (default 0:
-- unlimited; with a maximum, the oldest go first).  Another profiler
-- running on this lua_State is forcibly stopped.  options.timer: "precise"
-- (default), a timer signal every period of wall time; "tick", one on
-- the thread's CPU clock, which the kernel checks at its scheduler tick:
-- at most HZ samples a second, each weighing the periods since the last,
-- and no timer interrupt of its own; or "cpu", a perf event on the
-- thread's CPU time, a signal every period of it, none while it waits
-- ("tick" where the kernel refuses one) (docs/profiler.md, "The timers").
function Profiler:start(sample_rate_us, max_samples, options)
  check_profiler(self, "profiler:start")
  -- The core checks the arguments (naming profiler:start, as this caller
  -- counts them) and leaves nothing behind when a start fails (memory, the
  -- timer); its error is raised again at the caller's line.
  local before = Profiler.running()
  local ok, err = pcall(core.profiler_start, self.core, sample_rate_us, max_samples, options,
                        listen, self)
  if not ok then error(err, 2) end
  last_started[1] = self
  -- the one it forcibly stopped hears no more alerts (its stop would
  -- raise); p runs now, whatever this meets (memory, for one)
  if before and before ~= self then pcall(unlisten, before) end
end

--- The profiler running on this lua_State, or nil: one runs at a time, so
-- a module that wants samples reads this one's rather than start its own
-- (which would stop it).
function Profiler.running()
  local p = last_started[1]
  if p and core.profiler_state(p.core) == "running" then return p end
  return nil
end

--- Whether this profiler is sampling now.
function Profiler:is_profiling()
  check_profiler(self, "profiler:is_profiling")
  return core.profiler_state(self.core) == "running"
end

--- Stops profiling; an error if it is not running (never started, already
-- stopped, or forcibly stopped by another profiler).
function Profiler:stop()
  check_profiler(self, "profiler:stop")
  check_running(self, "profiler:stop")
  core.profiler_stop(self.core)
  unlisten(self)
end

--- The table of the caller's backtrace: the same table for every call from
-- the same backtrace (function and line, all the way down), shown as that
-- stack's `data` in results().  An error if the profiler is not running.
function Profiler:frame()
  check_profiler(self, "profiler:frame")
  check_running(self, "profiler:frame")
  local node = core.profiler_frame(self.core, 2) -- 0: that C function, 1: here
  local t = self.data[node]
  if t == nil then
    t = {}
    self.data[node] = t
  end
  return t
end

--- Forgets every sample, stack, frame() table and marker.
function Profiler:reset()
  check_profiler(self, "profiler:reset")
  local ok, err = pcall(core.profiler_reset, self.core)
  if not ok then error("profiler:reset: " .. tostring(err), 2) end
  self.data = {}
  for i = #self.markers, 1, -1 do self.markers[i] = nil end
end

----------------------------------------------------------------------------
-- Reading it out
----------------------------------------------------------------------------

-- The records, with per-node func and site tables made once.
local function snapshot(self)
  local d = core.profiler_dump(self.core)
  local funcs, nodes = d.funcs, d.nodes
  local n = #nodes.func
  d.n = n
  d.site = {}
  for i = 1, n do
    local f = funcs[nodes.func[i]]
    d.site[i] = { file = f.file, line = nodes.line[i] }
  end
  return d
end

local function func_copy(f)
  return { file = f.file, line = f.line, name = f.name, what = f.what,
           group = f.group, group_id = f.group_id }
end

--- The trie of every stack sampled since reset():
-- { samples, gc_samples, micros, max_depth, truncated, throttled, timer,
--   children = { { func = {file, line, name, what, group, group_id},
--   site = {file, line}, samples, self_count, data, children }, ... } }.
-- Counts are sampling periods: a sample of weight w counts w times;
-- samples = self_count + the children's samples everywhere.  A sample keeps
-- the max_depth frames on the top of its stack; truncated counts the samples
-- whose stack was deeper (their paths begin max_depth frames down).
-- throttled counts the samples put off past a period because the profiler's
-- own cost was high (a fast rate, a deep stack): they weigh more instead.
-- timer is the one the last start ran: "precise", "tick", or "cpu" ("tick"
-- where the kernel refused the perf event "cpu" asked for).
function Profiler:results()
  check_profiler(self, "profiler:results")
  local d = snapshot(self)
  local nodes = d.nodes
  local root = { samples = d.total, gc_samples = d.gc, micros = math.floor(d.micros),
                 max_depth = d.max_depth, truncated = d.truncated, throttled = d.throttled,
                 timer = d.timer,
                 self_count = 0, children = {} }
  local made = {}
  for i = 1, d.n do -- a parent is always made before its children
    local f = d.funcs[nodes.func[i]]
    local node = {
      func = func_copy(f), site = d.site[i],
      samples = nodes.total[i], self_count = nodes.self[i],
      data = self.data[i],
    }
    made[i] = node
    local parent = nodes.parent[i] == 0 and root or made[nodes.parent[i]]
    parent.children = parent.children or {}
    parent.children[#parent.children + 1] = node
  end
  root.self_count = nil
  return root
end

--- The samples kept (all since reset(), or the newest max_samples), oldest
-- first: { { micros, weight, thread, stack = { {func, site}, ... } }, ... }
-- with the top of the stack first.  micros is the time of the sample in µs
-- since the epoch (the clock of perfmon snapshots); weight the sampling
-- periods it stands for (more than 1 when C code held the sampler off).
function Profiler:samples()
  check_profiler(self, "profiler:samples")
  local d = snapshot(self)
  local nodes, funcs = d.nodes, {}
  for i, f in ipairs(d.funcs) do funcs[i] = func_copy(f) end
  local out = {}
  local s = d.samples
  for i = 1, #s.node do
    local stack = {}
    local k = s.node[i]
    while k ~= 0 do
      stack[#stack + 1] = { func = funcs[nodes.func[k]], site = d.site[k] }
      k = nodes.parent[k]
    end
    out[i] = { micros = math.floor(s.time[i]), weight = s.weight[i],
               thread = s.thread[i], stack = stack }
  end
  return out
end

--- The Gecko profile JSON (the format the Firefox Profiler's back end
-- writes), which https://profiler.firefox.com opens; see perfmon.gecko.
function Profiler:to_gecko()
  check_profiler(self, "profiler:to_gecko")
  local d = snapshot(self)
  d.markers = self.markers
  return require("perfmon.gecko").encode(require("perfmon.gecko").profile(d))
end

--- Writes to_gecko() to path; returns path.  tools/flamegraph turns the
-- file into an SVG flame graph.
function Profiler:save(path)
  check_profiler(self, "profiler:save")
  if type(path) ~= "string" then
    arg_error(1, "profiler:save", "string expected, got " .. type(path))
  end
  local text = self:to_gecko()
  local f, err = io.open(path, "w")
  if not f then error("profiler:save: " .. tostring(err), 2) end
  f:write(text)
  f:close()
  return path
end


return Profiler
