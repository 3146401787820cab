--- perfmon.plugin_watcher: when to tell the user that a plugin is slow.
--
-- A policy on top of perfmon.watcher, after Firefox's AddonWatcher.  One
-- alert is a hiccup; a plugin is worth a warning when it keeps janking
-- (alerts alerts within alerts_window_ms) or when it keeps the CPU busy
-- without ever janking (cpu_percent of the wall time over cpu_window_ms,
-- in many short events).  A plugin is warned about at most once per
-- window, and never when its name is on the ignore list.  Both are judged
-- on self time, as the watcher's alerts are: a dispatcher that calls a
-- slow plugin spends the plugin's time inclusive of its own, but it is the
-- plugin that is slow.  time = "inclusive" judges on inclusive time, and
-- makes the watcher decide its alerts on it while this one runs.
--
-- A warning says where the plugin's time went (perfmon.where): from the
-- samples of the profiler given, else of the one running, else of one it
-- keeps running itself at a low rate on the cheap "tick" timer.
--
-- mode = "sampled" watches with sampled monitors (no call/return hook, the
-- watcher's too), cheap enough to leave on; with escalate_ms, a warning
-- then opens a diagnosis for that long, whose figures go to on_diagnosis:
-- a sampled monitor at a higher rate (diagnosis_rate_us) whose rate and
-- figures end with its window, even inside a long event (perfmon.monitor's
-- window_ms), or with diagnosis = "exact" an exact monitor (the call/return
-- hook: docs/performance.md gives its cost), ended by the first poll after
-- the window, an event's end.  A group is diagnosed again only
-- rediagnose_ms after its last diagnosis began: a plugin busy all the time
-- is warned about every window, and a diagnosis after each would keep the
-- higher rate on for good.

local perfmon = require("perfmon")
local watcher = require("perfmon.watcher")
local Profiler = require("perfmon.profiler")
local where = require("perfmon.where")
local core = require("perfmon.loader")

local PluginWatcher = {}
PluginWatcher.__index = PluginWatcher

local DEFAULTS = {
  alerts = 3, -- alerts within alerts_window_ms: three janks in 30 s is a pattern
  alerts_window_ms = 30000,
  cpu_percent = 50, -- half a core for 10 s, with no jank: a busy loop
  cpu_window_ms = 10000,
  kind = "plugin", -- the kind of groups watched; "*" for all
  time = "self", -- or "inclusive": what counts as a plugin's time
  mode = "exact", -- or "sampled": the monitors' (perfmon.monitor)
}
local SAMPLES_PER_WINDOW = 10 -- CPU samples taken per cpu_window_ms
-- Its own profiler's period: at most 100 samples a second of CPU, some
-- 0.1% of it (docs/performance.md), and 20 samples of a plugin that janked
-- three times 64 ms, enough to say where.
local PROFILE_RATE_US = 10000
-- A sampled diagnosis's period: four times the sampled mode's samples, a
-- 2x tighter estimate, for a cost within a few percent of it
-- (docs/performance.md).
local DIAGNOSIS_RATE_US = 1000
-- A group's diagnoses at most once a minute: with the 10 s default window,
-- a sixth of the time at the diagnosis's rate for a plugin that is always
-- busy.
local REDIAGNOSE_MS = 60000

local args = require("perfmon.args")

-- In check_options (depth: the helpers between it and the call, if any).
local function arg_error(msg, depth)
  args.error(1, "perfmon.plugin_watcher.new", msg, 3 + (depth or 0))
end

-- The numeric options: what each must be, and the test (each false for
-- NaN).  A count of alerts is a whole number (0.5 alerts would warn at the
-- first); a share of one thread's CPU time cannot pass 100%, so a higher
-- cpu_percent would never warn; a window is below the watcher's bound for
-- ms (core.watch_max_us), which its ticker must meet.
local MAX_MS = core.watch_max_us / 1000
local function is_window(v) return v > 0 and v < MAX_MS end
local NUMBERS = {
  alerts = { "a whole number >= 1", function(v)
    return v >= 1 and v < math.huge and v == math.floor(v) end },
  alerts_window_ms = { ("a positive number of ms below %g"):format(MAX_MS), is_window },
  cpu_percent = { "a number in (0, 100]", function(v) return v > 0 and v <= 100 end },
  cpu_window_ms = { ("a positive number of ms below %g"):format(MAX_MS), is_window },
  escalate_ms = { ("a positive number of ms below %g"):format(MAX_MS), is_window },
  rediagnose_ms = { ("a positive number of ms below %g"):format(MAX_MS), is_window },
  rate_us = { ("a whole number in [%d, %d]"):format(core.rate_min_us, core.rate_max_us),
    function(v)
      return v >= core.rate_min_us and v <= core.rate_max_us and v == math.floor(v)
    end },
  diagnosis_rate_us = { ("a whole number in [%d, %d]"):format(core.rate_min_us, core.rate_max_us),
    function(v)
      return v >= core.rate_min_us and v <= core.rate_max_us and v == math.floor(v)
    end },
  -- the profiler's own bounds (docs/profiler.md)
  profile_rate_us = { "a whole number in [10, 60000000]", function(v)
    return v >= 10 and v <= 60000000 and v == math.floor(v) end },
}

local OPTION_NAMES = { on_warning = true, ignore = true, escalate_ms = true,
  on_diagnosis = true, rate_us = true, profiler = true, profile_rate_us = true,
  diagnosis = true, diagnosis_rate_us = true, rediagnose_ms = true }
for k in pairs(DEFAULTS) do OPTION_NAMES[k] = true end
local VALID = {}
for k in pairs(OPTION_NAMES) do VALID[#VALID + 1] = k end
table.sort(VALID)
VALID = table.concat(VALID, ", ")

-- Option k, if given, is one of the strings a and b.
local function check_choice(opts, k, a, b)
  local v = opts[k]
  if v ~= nil and v ~= a and v ~= b then
    arg_error(("'%s' must be \"%s\" or \"%s\", got %s"):format(k, a, b,
      type(v) == "string" and ("%q"):format(v) or type(v)), 1)
  end
end

-- Every option is checked before anything starts: a typo (alert = 5) is an
-- error, not a default silently kept.
local function check_options(opts)
  if type(opts) ~= "table" then arg_error("table expected, got " .. type(opts)) end
  for k in pairs(opts) do
    if not OPTION_NAMES[k] then
      arg_error(("unknown option %s (options: %s)"):format(
        type(k) == "string" and ("%q"):format(k)
          or "[" .. (math.type(k) and tostring(k) or type(k)) .. "]", VALID))
    end
  end
  if type(opts.on_warning) ~= "function" then
    arg_error("'on_warning' must be a function, got " .. type(opts.on_warning))
  end
  for k, check in pairs(NUMBERS) do
    local v = opts[k]
    if v ~= nil and type(v) ~= "number" then
      arg_error(("'%s' must be a number, got %s"):format(k, type(v)))
    elseif v ~= nil and not check[2](v) then -- false for NaN too
      arg_error(("'%s' must be %s, got %s"):format(k, check[1], tostring(v)))
    end
  end
  check_choice(opts, "mode", "exact", "sampled")
  if opts.escalate_ms ~= nil and opts.mode ~= "sampled" then
    arg_error("'escalate_ms' needs mode = \"sampled\" (an exact watcher has the exact figures)")
  end
  if opts.rate_us ~= nil and opts.mode ~= "sampled" then
    arg_error("'rate_us' needs mode = \"sampled\" (an exact watcher takes no samples)")
  end
  check_choice(opts, "diagnosis", "sampled", "exact")
  if (opts.diagnosis ~= nil or opts.diagnosis_rate_us ~= nil) and opts.escalate_ms == nil then
    arg_error(("'%s' needs 'escalate_ms' (the diagnosis's window)"):format(
      opts.diagnosis ~= nil and "diagnosis" or "diagnosis_rate_us"))
  end
  if opts.rediagnose_ms ~= nil and opts.escalate_ms == nil then
    arg_error("'rediagnose_ms' needs 'escalate_ms' (the diagnosis's window)")
  end
  if opts.rediagnose_ms ~= nil and opts.rediagnose_ms < opts.escalate_ms then
    arg_error(("'rediagnose_ms' must be at least 'escalate_ms' (%g), got %g")
      :format(opts.escalate_ms, opts.rediagnose_ms))
  end
  if opts.diagnosis_rate_us ~= nil and opts.diagnosis == "exact" then
    arg_error("'diagnosis_rate_us' is for diagnosis = \"sampled\" (an exact one takes no samples)")
  end
  if opts.on_diagnosis ~= nil and type(opts.on_diagnosis) ~= "function" then
    arg_error("'on_diagnosis' must be a function, got " .. type(opts.on_diagnosis))
  end
  check_choice(opts, "time", "self", "inclusive")
  if opts.profiler ~= nil and opts.profiler ~= false
    and getmetatable(opts.profiler) ~= Profiler then
    arg_error("'profiler' must be a perfmon.profiler or false, got " .. type(opts.profiler))
  end
  if opts.profile_rate_us ~= nil and opts.profiler ~= nil then
    arg_error("'profile_rate_us' is the rate of the plugin watcher's own profiler, "
      .. "which it does not run with 'profiler' given")
  end
  if opts.kind ~= nil and (type(opts.kind) ~= "string" or opts.kind == "") then
    arg_error("'kind' must be a group kind or \"*\", got "
      .. (opts.kind == "" and "an empty string" or type(opts.kind)))
  end
  if opts.ignore ~= nil and type(opts.ignore) ~= "table" then
    arg_error("'ignore' must be a list of plugin names, got " .. type(opts.ignore))
  end
  for i, name in ipairs(opts.ignore or {}) do
    if type(name) ~= "string" then
      arg_error(("'ignore' must hold names: index %d is a %s"):format(i, type(name)))
    end
  end
end

-- A method called without its object (pw.close() for pw:close()) says so; fname is
-- the method as the API writes it.
local function check_self(self, fname)
  args.check_self(self, PluginWatcher, fname, "plugin watcher", 2)
end

-- The plugin watchers running, oldest first: the watcher's mode is the
-- newest one's, its time "inclusive" while any of them judges on it (one
-- on self time counts the alerts' self_count then), and both what they
-- were before the first (before) once they are all closed, whatever order
-- they close in.  opening: a plugin watcher not yet running.
local running, before = {}, nil
local function set_mode(opening)
  local last = opening or running[#running]
  local time = before.time
  for _, pw in ipairs(running) do
    if pw.time == "inclusive" then time = "inclusive" end
  end
  if opening and opening.time == "inclusive" then time = "inclusive" end
  watcher.configure { mode = last and last.mode or before.mode, time = time }
end

--- Starts watching.  opts: on_warning (required: called with each
-- warning), alerts, alerts_window_ms, cpu_percent, cpu_window_ms, kind,
-- time, ignore (a list of group names), mode ("exact" or "sampled"; the
-- watcher's mode is set to it while this plugin watcher runs), rate_us
-- (sampled mode: its monitor's, perfmon.monitor's), escalate_ms,
-- on_diagnosis, diagnosis ("sampled" or "exact"), diagnosis_rate_us
-- (sampled mode: see _diagnose) and rediagnose_ms, profiler (the samples
-- warnings say where from, or false for none) and profile_rate_us (its
-- own profiler's period, when profiler is not given).
function PluginWatcher.new(opts)
  check_options(opts)
  local self = setmetatable({ on_warning = opts.on_warning, ignored = {},
    alert_times = {}, warned = {}, samples = {}, spare = {}, at_base = {},
    unwatched = {}, polls = 0, closed = false,
    escalate_ms = opts.escalate_ms, on_diagnosis = opts.on_diagnosis,
    diagnosis_mode = opts.diagnosis or "sampled",
    diagnosis_rate_us = opts.diagnosis_rate_us or DIAGNOSIS_RATE_US,
    rediagnose_ms = opts.rediagnose_ms or math.max(REDIAGNOSE_MS, opts.escalate_ms or 0),
    diagnosed = {},
    profiler = opts.profiler, profile_rate_us = opts.profile_rate_us or PROFILE_RATE_US,
    own_profiler = false, profiler_error = false }, PluginWatcher)
  for k, default in pairs(DEFAULTS) do self[k] = opts[k] or default end
  for _, name in ipairs(opts.ignore or {}) do self.ignored[name] = true end
  if #running == 0 then before = watcher.configure() end
  set_mode(self)
  local ok, mon = pcall(perfmon.monitor, { "jank", mode = self.mode, rate_us = opts.rate_us })
  if not ok then
    set_mode()
    error(mon, 0) -- as perfmon.monitor raised it
  end
  self.monitor = mon
  running[#running + 1] = self
  self.on_alerts = function(batch) self:_alerts(batch) end
  self.on_tick = function() self:poll() end
  watcher.add_listener("*", self.on_alerts)
  watcher.add_ticker(self.on_tick, self.cpu_window_ms / SAMPLES_PER_WINDOW)
  self:poll()
  return self
end

-- The profiler whose samples say where, started if need be: the one given,
-- else the one running on this lua_State (a host's: starting another would
-- stop it), else this plugin watcher's own, started again when another's
-- start stopped it and that one stopped too.  Its ring holds the longer
-- window's samples (a period of CPU time each, so at most one a period of
-- wall time).  nil when there is none (profiler = false, or the start
-- failed: profiler_error says why).
function PluginWatcher:_profiler()
  if self.profiler ~= nil then return self.profiler or nil end
  local p = Profiler.running()
  if p then return p end
  local own = self.own_profiler or Profiler.new()
  local window_us = math.max(self.alerts_window_ms, self.cpu_window_ms) * 1000
  local ok, err = pcall(own.start, own, self.profile_rate_us,
    math.ceil(window_us / self.profile_rate_us) + 1, { timer = "tick" })
  if not ok then
    self.profiler_error = err
    return nil
  end
  self.own_profiler, self.profiler_error = own, false
  return own
end

-- Where the warned group's self time went in the warning's window (since_us
-- to until_us, µs since the epoch), and the words for the message.  snap:
-- a snapshot of now, for the groups marked as libraries (nil: one is taken).
function PluginWatcher:_where(source, snap, since_us, until_us)
  if self.profiler == false then return nil, nil end
  local p = self:_profiler()
  if not p then
    return nil, "no profiler ran to say where (" .. tostring(self.profiler_error) .. ")"
  end
  snap = snap or self.monitor:snapshot()
  local found = where.find(p, source.id, since_us, until_us, where.libraries(snap))
  return found, where.text(found)
end

function PluginWatcher:_watched(source)
  return (self.kind == "*" or source.kind == self.kind) and not self.ignored[source.name]
end

-- At most one warning per plugin per window: the first one says it all.
function PluginWatcher:_warned_within(id, now, window_ms)
  local last = self.warned[id]
  return last ~= nil and now - last < window_ms * 1000
end

-- since_us, until_us: the warning's window, µs since the epoch (until_us
-- nil: now).
function PluginWatcher:_warn(source, now, window_ms, w, snap, since_us, until_us)
  if self:_warned_within(source.id, now, window_ms) then return end
  self.warned[source.id] = now
  w.group, w.window_ms = source, window_ms
  local found, text = self:_where(source, snap, since_us, until_us)
  w.where = found
  if text then w.message = w.message .. "; " .. text end
  if self.escalate_ms and not self.diagnosis then self:_escalate(source, now, w) end
  self.on_warning(w)
end

-- A warning opens the diagnosis: a sampled monitor at diagnosis_rate_us
-- for escalate_ms (its window, which the core ends at the sample past it),
-- or an exact monitor.  w.diagnosing says whether it runs; where the core
-- refuses (another plugin watcher's window is open), w.diagnosis_error
-- says why; where the group's last diagnosis began (w.diagnosed_us, µs
-- since the epoch) less than rediagnose_ms ago, none opens.
function PluginWatcher:_escalate(source, now, w)
  local last = self.diagnosed[source.id]
  if last and now - last < self.rediagnose_ms * 1000 then
    w.diagnosing, w.diagnosed_us = false, last
    return
  end
  local probes = { "jank" }
  if self.diagnosis_mode == "sampled" then
    probes.mode, probes.rate_us, probes.window_ms = "sampled", self.diagnosis_rate_us, self.escalate_ms
  end
  local ok, m = pcall(perfmon.monitor, probes)
  w.diagnosing = ok
  if not ok then
    w.diagnosis_error = m
    return
  end
  self.diagnosed[source.id] = now
  self.diagnosis = { monitor = m, since = now, before = m:snapshot(), warning = w }
end

-- The group's figures in a diagnosis: a sampled one's CPU and self time
-- and samples are its window's (monitor:window); its events and their
-- histograms, the events that ended from the warning to now (diff).
local function diagnosed(group, diff, window)
  local st = diff.groups[group.id]
  if not window or not st then return st end
  local w = window.groups[group.id] or { cpu_us = 0, self_us = 0, samples = 0, self_samples = 0 }
  return { id = st.id, name = st.name, kind = st.kind, cpu_us = w.cpu_us,
    self_us = w.self_us, samples = w.samples, self_samples = w.self_samples,
    events = st.events, event_us = st.event_us, self_event_us = st.self_event_us,
    durations = st.durations, self_durations = st.self_durations, longest = st.longest }
end

-- The diagnosis window is over: its figures go to on_diagnosis with the
-- warning that began it, and its monitor closes (the hook with it, for an
-- exact one, unless another is open).  A sampled one's rate ended with
-- its window already, at the sample past it; its figures are the window's
-- alone (window: monitor:window()'s), window_ms the span they cover (to
-- its last sample).
function PluginWatcher:_diagnose(now)
  local d = self.diagnosis
  if not d or now - d.since < self.escalate_ms * 1000 then return end
  self.diagnosis = nil
  local diff = d.monitor:snapshot():subtract(d.before)
  local window = d.monitor.window_ms and d.monitor:window()
  d.monitor:close()
  if self.on_diagnosis then
    local group = d.warning.group
    self.on_diagnosis { warning = d.warning, group = group, mode = self.diagnosis_mode,
      rate_us = self.diagnosis_mode == "sampled" and self.diagnosis_rate_us or nil,
      window_ms = (window and window.last_us - window.since_us or now - d.since) / 1000,
      snapshot = diff, window = window, stats = diagnosed(group, diff, window) }
  end
end

-- An alert may stand for several events (merged while buffered): each
-- counts.  "the last for" is the highest since the previous alert.
function PluginWatcher:_alerts(batch)
  local now = core.wall_us()
  local window = self.alerts_window_ms * 1000
  local on_self = self.time == "self"
  for _, alert in ipairs(batch) do
    local src, d = alert.source, alert.details
    -- on self time, a jank alert counts the events that janked on the
    -- group's own time: none for a caller of the janky code
    local events = on_self and d.reason == "jank" and d.self_count or d.count
    if self:_watched(src) and events > 0 then
      local seen = self.alert_times[src.id] or {} -- { {at = µs, n = events} }
      self.alert_times[src.id] = seen
      seen[#seen + 1] = { at = now, n = events }
      while now - seen[1].at > window do table.remove(seen, 1) end
      local n = 0
      for _, s in ipairs(seen) do n = n + s.n end
      if n >= self.alerts then
        local what = d.reason == "jank"
          and ("janked %d times (up to %.0f ms%s)"):format(n,
            (on_self and d.highest_self_us or d.highest_jank_us) / 1000,
            d.visible and ", visibly" or "")
          or ("blocked %d times (up to %.0f ms)"):format(n, d.highest_blocking_us / 1000)
        self:_warn(src, now, self.alerts_window_ms, {
          reason = "alerts", alerts = n, details = d,
          message = ("plugin '%s' is slowing things down: it %s in %g s")
            :format(src.name, what, self.alerts_window_ms / 1000),
        }, nil, d.time_us - self.alerts_window_ms * 1000)
      end
    end
  end
end

-- A CPU sample: the CPU and self µs of every live group (core.times: a
-- flat list of id, cpu_us, self_us), read into a list kept from a sample
-- that left the window: a snapshot a poll, with its tables per group,
-- would be garbage for a busy server's collector, and ten of them live in
-- the window (docs/performance.md, "Where sampled mode's cost went").
function PluginWatcher:_sample(now)
  local s = table.remove(self.spare) or { list = {} }
  local n = core.times(s.list)
  for i = #s.list, n + 1, -1 do s.list[i] = nil end
  s.time = now
  return s
end

-- The groups above cpu_percent from base to the newest sample, warned
-- about unless warned within the window; a snapshot (a group's name and
-- kind, the libraries for where) only when there is one to warn about.
-- Groups not watched (their kind, the ignore list: neither changes) are
-- remembered as long as they live, so that a busy one costs no snapshot.
function PluginWatcher:_judge(base, newest, now)
  local wall, window_ms = now - base.time, self.cpu_window_ms
  local field = self.time == "self" and 2 or 1 -- after an id: cpu_us, self_us
  local at_base, list, snap = self.at_base, newest.list, nil
  self.polls = self.polls + 1
  for i = 1, #base.list, 3 do at_base[base.list[i]] = base.list[i + field] end
  for i = 4, #list, 3 do -- after the process's
    local id = list[i]
    local percent = 100 * (list[i + field] - (at_base[id] or 0)) / wall
    if self.unwatched[id] then
      self.unwatched[id] = self.polls
    elseif percent >= self.cpu_percent and not self:_warned_within(id, now, window_ms) then
      snap = snap or self.monitor:snapshot()
      local st = snap.groups[id]
      if not st or not self:_watched(st) then -- (not st: it died since)
        self.unwatched[id] = self.polls
      else
        local source = { id = st.id, name = st.name, kind = st.kind, memberships = st.memberships }
        self:_warn(source, now, window_ms, {
          reason = "cpu", cpu_percent = percent,
          message = ("plugin '%s' is slowing things down: it used %.0f%% of the CPU over the last %.1f s")
            :format(st.name, percent, wall / 1e6),
        }, snap, snap.time - wall, snap.time)
      end
    end
  end
  for id in pairs(at_base) do at_base[id] = nil end
  for id, poll in pairs(self.unwatched) do
    if poll ~= self.polls then self.unwatched[id] = nil end -- a group gone
  end
end

--- Samples the plugins' CPU time and warns about those above cpu_percent
-- over the last window.  Runs on its own after events; hosts with long idle
-- periods may call it from their idle loop.
function PluginWatcher:poll()
  check_self(self, "plugin_watcher:poll")
  if self.closed then error("plugin_watcher:poll: the plugin watcher is closed", 2) end
  local now = core.wall_us()
  self:_diagnose(now)
  self:_profiler() -- kept running
  if self.own_profiler then
    -- its jank markers (docs/profiler.md) are of no use here, and would
    -- grow for as long as it runs
    local markers = self.own_profiler.markers
    for i = #markers, 1, -1 do markers[i] = nil end
  end
  local samples = self.samples
  samples[#samples + 1] = self:_sample(now)
  -- keep the newest sample at least a window old: the base of the window
  local window = self.cpu_window_ms * 1000
  while #samples > 1 and now - samples[2].time >= window do
    self.spare[#self.spare + 1] = table.remove(samples, 1)
  end
  if now - samples[1].time >= window then self:_judge(samples[1], samples[#samples], now) end
end

--- Never warn about the plugin with this name (a group's name).
function PluginWatcher:ignore(name)
  check_self(self, "plugin_watcher:ignore")
  if type(name) ~= "string" then
    args.error(1, "plugin_watcher:ignore", "string expected, got " .. type(name))
  end
  self.ignored[name] = true
end

--- Stops watching; closing twice does nothing.
function PluginWatcher:close()
  check_self(self, "plugin_watcher:close")
  if self.closed then return end
  self.closed = true
  watcher.remove_listener("*", self.on_alerts)
  watcher.remove_ticker(self.on_tick)
  if self.diagnosis then self.diagnosis.monitor:close() end
  self.diagnosis = nil
  if self.own_profiler and self.own_profiler:is_profiling() then self.own_profiler:stop() end
  for i = #running, 1, -1 do
    if running[i] == self then table.remove(running, i) end
  end
  set_mode()
  self.monitor:close()
end

PluginWatcher.__close = PluginWatcher.close

return PluginWatcher
