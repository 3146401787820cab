--- perfmon.watcher: "this group is slowing you down", as it happens.
--
-- Firefox's PerformanceWatcher for Lua hosts.  The C core detects alerts at
-- each event's end (a group's self time in one event reached the jank
-- threshold, or its blocking time the blocking threshold) and, once the
-- event is over, calls dispatch() below in a quiet region: what listeners
-- run is charged to no group.  Alerts are buffered for buffering_delay_ms,
-- so that a burst reaches the universal listener as one list.
--
-- While nobody listens, no dispatcher is set and the core does no alert
-- work at all; the hook never does any.

local core = require("perfmon.loader")
local module = require("perfmon.module")
local perfmon = require("perfmon")

local watcher = {}

-- An error object as text, as lua.c reports one: a string or a number as
-- it is, else what its __tostring returns if that is a string, else its
-- type.  Never raises: it is the last resort of error reports, and an error
-- in it would abort the dispatch that called it.
local function describe(err)
  local t = type(err)
  if t == "string" or t == "number" then return tostring(err) end
  local mt = getmetatable(err)
  local meta = type(mt) == "table" and rawget(mt, "__tostring")
  if meta then
    local ok, s = pcall(meta, err)
    if ok and type(s) == "string" then return s end
  end
  return ("(error object is a %s value)"):format(t)
end

-- A bad argument as an error shows it: a number as itself, else its type.
local function number_or_type(v)
  return math.type(v) and tostring(v) or type(v)
end

local settings = {
  jank_threshold_us = 64000, -- Firefox's jankAlertThreshold
  blocking_threshold_us = 64000,
  buffering_delay_ms = 100,
  input_window_ms = 100, -- jank this soon after input is visible
  -- what a jank alert is decided on: "self" (the group's own code; a
  -- dispatcher's inclusive time holds every plugin it calls) or "inclusive"
  time = "self",
  -- the watcher's monitor's (perfmon.monitor); "auto": sampled when the
  -- monitors open when it opens are all sampled, else exact, so that a
  -- listener (the profiler's markers) does not turn the hook on
  mode = "auto",
  on_error = function(err, target)
    io.stderr:write(("perfmon.watcher: listener for %s failed: %s\n")
      :format(target == "*" and '"*"' or describe(target), describe(err)))
  end,
}

local listeners = {} -- [group id or "*"] = { fn, ... } in order of addition
local targets = {} -- [group id] = the group, for error reports
local tickers = {} -- { {fn = fn, interval = µs, due = µs}, ... }
local nlisteners = 0
local monitor -- held while anyone listens or ticks
local buffer = {} -- alerts waiting for the delay, in order of arrival
local buffered = {} -- [group id] = its entry in buffer
local buffer_since -- wall µs when the first of them arrived
local delivered = 0 -- alerts delivered so far: poll and flush report the rise
local forced = false -- flush(): deliver whatever the delay

local args = require("perfmon.args")
local arg_error, callable = args.error, args.callable

----------------------------------------------------------------------------
-- Delivery (runs in the quiet region the core opens for it)
----------------------------------------------------------------------------

-- Calls fn(...); an error goes to the error handler, and if the handler
-- fails too, to stderr: a listener never stops the others or the host.
-- Nothing here runs unprotected but describe(), which cannot fail: an
-- error object whose __tostring raises would otherwise abort the dispatch,
-- and the rest of the batch would never be delivered.
local function call(target, fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then
    local hok, herr = pcall(settings.on_error, err, target, fn)
    if not hok then
      io.stderr:write(("perfmon.watcher: error handler failed: %s (handling: %s)\n")
        :format(describe(herr), describe(err)))
    end
  end
end

-- A group that alerts again while buffered keeps one entry: the highest
-- figures, visible if any was, the latest time, the events counted.
local function merge(alert)
  local old = buffered[alert.source.id]
  if not old then
    buffer[#buffer + 1] = alert
    buffered[alert.source.id] = alert
    return
  end
  local d, n = old.details, alert.details
  d.highest_jank_us = math.max(d.highest_jank_us, n.highest_jank_us)
  d.highest_blocking_us = math.max(d.highest_blocking_us, n.highest_blocking_us)
  d.highest_self_us = math.max(d.highest_self_us, n.highest_self_us)
  d.visible = d.visible or n.visible
  d.time_us = n.time_us
  d.count = d.count + n.count
  d.self_count = d.self_count + n.self_count
end

local function copy(list)
  return table.move(list, 1, #list, 1, {})
end

local function flush()
  local batch = buffer
  buffer, buffered, buffer_since = {}, {}, nil
  for _, alert in ipairs(batch) do
    local id = alert.source.id
    for _, fn in ipairs(copy(listeners[id] or {})) do
      call(targets[id], fn, alert.source, alert.details)
    end
  end
  for _, fn in ipairs(copy(listeners["*"] or {})) do
    call("*", fn, batch)
  end
  delivered = delivered + #batch
end

-- Called by the core after an event; returns in how many µs it wants to be
-- called again (nil: only when new alerts come).
local function dispatch()
  local now = core.wall_us()
  for _, alert in ipairs(core.alerts()) do
    buffer_since = buffer_since or now
    merge(alert)
  end
  local delay = settings.buffering_delay_ms * 1000
  if buffer_since and (forced or now - buffer_since >= delay) then
    flush()
  end
  local wait = buffer_since and buffer_since + delay - now
  for _, t in ipairs(copy(tickers)) do
    if now >= t.due then
      t.due = now + t.interval
      call("ticker", t.fn)
    end
    wait = math.min(wait or math.huge, t.due - now)
  end
  return wait
end

----------------------------------------------------------------------------
-- Listening
----------------------------------------------------------------------------

-- 1000.0, not 1000: an integer setting times 1000 could wrap around.
local function watch(s)
  s = s or settings
  core.watch(dispatch, s.jank_threshold_us, s.blocking_threshold_us,
    s.input_window_ms * 1000.0, s.time == "inclusive")
end

-- The first listener or ticker opens the watcher's monitor; the last one
-- closes it.  A failure opening it leaves nothing open.
-- own: the watcher's monitor open now (a change of mode), not counted.
local function open_monitor(mode, own)
  if mode == "auto" then
    local info = core.info()
    local exact, sampled = info.exact_monitors, info.sampled_monitors
    if own and own.mode == "sampled" then sampled = sampled - 1
    elseif own then exact = exact - 1 end
    mode = sampled > 0 and exact == 0 and "sampled" or "exact"
  end
  return perfmon.monitor { "jank", "blocking", mode = mode }
end

local function retain()
  if nlisteners == 0 then
    local m = open_monitor(settings.mode)
    local ok, err = pcall(watch)
    if not ok then
      m:close()
      error(err, 0)
    end
    monitor = m
  end
  nlisteners = nlisteners + 1
end

local function release()
  nlisteners = nlisteners - 1
  if nlisteners == 0 then
    core.watch(nil)
    buffer, buffered, buffer_since = {}, {}, nil
    monitor:close()
    monitor = nil
  end
end

local function check_target(target, fname)
  if target == "*" then return "*" end
  if not core.is_group(target) then
    arg_error(1, fname, 'perfmon.group or "*" expected, got ' .. type(target), 2)
  end
  return target.id
end

local function find(list, fn)
  for i, f in ipairs(list or {}) do
    if rawequal(f, fn) then return i end
  end
end

--- Calls fn(source, details) for each alert of group target, or fn(list)
-- with the buffered alerts of every group when target is "*".  Adding the
-- same listener twice has no effect.
function watcher.add_listener(target, fn)
  local key = check_target(target, "perfmon.watcher.add_listener")
  args.check_callable(fn, 2, "perfmon.watcher.add_listener")
  if find(listeners[key], fn) then return end
  retain()
  listeners[key] = listeners[key] or {}
  table.insert(listeners[key], fn)
  if key ~= "*" then targets[key] = target end
end

--- Removes a listener added with add_listener; removing one that is not
-- registered for target is an error.
function watcher.remove_listener(target, fn)
  local key = check_target(target, "perfmon.watcher.remove_listener")
  local i = find(listeners[key], fn)
  if not i then arg_error(2, "perfmon.watcher.remove_listener", "not a listener of this target") end
  table.remove(listeners[key], i)
  if #listeners[key] == 0 then
    listeners[key] = nil
    if key ~= "*" then targets[key] = nil end
  end
  release()
end

--- Calls fn() after events, at most every interval_ms, outside groups (as
-- listeners run).  Used by the plugin watcher for its CPU windows.
function watcher.add_ticker(fn, interval_ms)
  args.check_callable(fn, 1, "perfmon.watcher.add_ticker")
  -- not (... > 0): NaN too, which would never tick, silently
  if type(interval_ms) ~= "number"
    or not (interval_ms > 0 and interval_ms * 1000.0 < core.watch_max_us) then
    arg_error(2, "perfmon.watcher.add_ticker", ("positive number of ms below %g expected, got %s")
      :format(core.watch_max_us / 1000, number_or_type(interval_ms)))
  end
  for _, t in ipairs(tickers) do
    if rawequal(t.fn, fn) then arg_error(1, "perfmon.watcher.add_ticker", "already a ticker") end
  end
  retain()
  local interval = interval_ms * 1000.0
  tickers[#tickers + 1] = { fn = fn, interval = interval, due = core.wall_us() + interval }
  watch() -- the next event's end dispatches, and learns the new delay
end

function watcher.remove_ticker(fn)
  for i, t in ipairs(tickers) do
    if rawequal(t.fn, fn) then
      table.remove(tickers, i)
      release()
      return
    end
  end
  arg_error(1, "perfmon.watcher.remove_ticker", "not a ticker")
end

-- With nobody listening the core calls no dispatcher, but still frees the
-- groups that died (perfmon_poll): a host that only polls stays flat.
local function deliver(force)
  local before = delivered
  forced = force
  local next_ms = core.deliver()
  forced = false
  return delivered - before, next_ms
end

--- Delivers the alerts whose buffering delay has passed, and runs the
-- tickers that are due.  Hosts call it from their idle loop; inside an
-- event it does nothing (the event's end delivers).  Returns the number of
-- alerts delivered, and the ms until the next buffered alert or ticker is
-- due (nil when nothing waits): the timeout of the host's next wait.
function watcher.poll()
  return deliver(false)
end

--- Delivers every buffered alert now, whatever the delay: at shutdown, or
-- at the end of a replay.  Returns as poll does.
function watcher.flush()
  return deliver(true)
end

----------------------------------------------------------------------------
-- Settings
----------------------------------------------------------------------------

-- The durations, by unit: µs for 1, ms for 1000.0 (a float: an integer
-- setting times 1000 could wrap around).  Their bound is the core's
-- (core.watch_max_us, which core.watch checks the thresholds against): a
-- bound of our own would let configure accept what watch then refuses.
-- buffering_delay_ms never reaches the core, but shares the bound.
local DURATIONS = {
  jank_threshold_us = 1, blocking_threshold_us = 1,
  buffering_delay_ms = 1000.0, input_window_ms = 1000.0,
}
local SETTING_NAMES = {}
for k in pairs(settings) do SETTING_NAMES[#SETTING_NAMES + 1] = k end
table.sort(SETTING_NAMES)
SETTING_NAMES = table.concat(SETTING_NAMES, ", ")

local function check_setting(k, v)
  local scale = DURATIONS[k]
  if scale then
    -- also false for NaN and infinities
    if not (type(v) == "number" and v >= 0 and v * scale < core.watch_max_us) then
      arg_error(1, "perfmon.watcher.configure", ("'%s' must be a number of %s in [0, %g), got %s")
        :format(k, scale == 1 and "µs" or "ms", core.watch_max_us / scale,
          number_or_type(v)), 2)
    end
  elseif k == "mode" then
    if v ~= "auto" and v ~= "exact" and v ~= "sampled" then
      arg_error(1, "perfmon.watcher.configure", ("'mode' must be \"auto\", \"exact\" or \"sampled\", got %s")
        :format(type(v) == "string" and ("%q"):format(v) or type(v)), 2)
    end
  elseif k == "time" then
    if v ~= "self" and v ~= "inclusive" then
      arg_error(1, "perfmon.watcher.configure", ("'time' must be \"self\" or \"inclusive\", got %s")
        :format(type(v) == "string" and ("%q"):format(v) or type(v)), 2)
    end
  elseif k == "on_error" then
    if not callable(v) then
      arg_error(1, "perfmon.watcher.configure", ("'on_error' must be a function, got %s"):format(type(v)), 2)
    end
  else
    arg_error(1, "perfmon.watcher.configure", ("unknown setting %s (settings: %s)")
      :format(type(k) == "string" and ("%q"):format(k) or "[" .. number_or_type(k) .. "]",
        SETTING_NAMES), 2)
  end
end

--- Changes any of the settings; returns a copy of them all.  All or
-- nothing: a call that raises has changed no setting.
function watcher.configure(t)
  if t ~= nil and type(t) ~= "table" then
    arg_error(1, "perfmon.watcher.configure", "table expected, got " .. type(t))
  end
  local new = {}
  for k, v in pairs(settings) do new[k] = v end
  for k, v in pairs(t or {}) do
    check_setting(k, v)
    new[k] = v
  end
  if nlisteners > 0 then
    watch(new) -- before settings change: it may raise
    if new.mode ~= settings.mode then -- the new one opens before the old goes
      local m = open_monitor(new.mode, monitor)
      monitor:close()
      monitor = m
    end
  end
  settings = new
  local out = {}
  for k, v in pairs(settings) do out[k] = v end
  return out
end

return module(watcher)
