-- tests/alloc_workload.lua -- the monitored workload of tests/alloc_fail.c.
--
-- alloc_fail runs this file as `work` with the Nth allocation failing, for
-- every N, then as `check` with nothing failing.  `work` is small (a few
-- hundred allocations after perfmon's own modules are compiled) but goes
-- through every place perfmon allocates: loading the core (its state, the
-- allocator self-check), groups, environments, chunks, sets, the function
-- map, shadow stacks and their growth, coroutines, snapshots.  `check`
-- proves that perfmon is consistent after whatever the failure did.

local phase = ...

-- What `work` leaves for `check`: the monitors it meant to leave open
-- (lua_close then closes the state with them open) and its snapshots.
KEEP = KEEP or { monitors = {}, snaps = {} }

local PLUGIN = [[
local t = {}
local function leaf(x) t[#t + 1] = x return x end
local function deep(n) if n == 0 then return leaf(n) end return (deep(n - 1)) end
local function tail(n) if n == 0 then return leaf(0) end return tail(n - 1) end
function run(n)
  local co = coroutine.wrap(function(a)
    for i = 1, a do coroutine.yield(leaf(i)) end
    return 0
  end)
  local s = co(n)
  for _ = 1, n do s = s + co() end
  pcall(function() deep(3) error({}) end)
  local mt = setmetatable({}, { __index = function(_, k) return leaf(k) end })
  return s + deep(40) + tail(10) + mt[7]
end
return run
]]

local function work()
  local perfmon = require("perfmon")
  local env = setmetatable({}, { __index = _G })
  local g = perfmon.group{ name = "a", kind = "plugin" }
  local run = perfmon.load(PLUGIN, "=alloc_plugin", env, g)()
  local mon = perfmon.monitor{ "jank", "ticks", "blocking", "chunks" }
  KEEP.monitors[#KEEP.monitors + 1] = mon -- left open: lua_close meets it
  KEEP.snaps[#KEEP.snaps + 1] = mon:snapshot()
  perfmon.event(run, 3)
  local g2 = perfmon.group{ name = "b", kind = "plugin" }
  perfmon.attach(env, g2) -- forgets every cached resolution
  perfmon.nested_loop(perfmon.event, run, 2)
  perfmon.blocking(run, 1)
  local co = coroutine.create(run) -- suspended for good, with frames
  coroutine.resume(co, 1)
  local inner <close> = perfmon.monitor{ "ticks" }
  MANUAL = true -- a bracket by hand: a memory error in run leaves it open
  perfmon.event_begin()
  run(1)
  perfmon.event_end()
  MANUAL = false
  KEEP.snaps[#KEEP.snaps + 1] = mon:snapshot()
  perfmon.detach(env, g)
end

-- The stats of every snapshot kept never decrease, and no group exceeds
-- the process.
local FIELDS = { "user_us", "system_us", "cpu_us", "blocking_us" }
local function check_snapshot(s, prev)
  for id, st in pairs(s.groups) do
    for _, f in ipairs(FIELDS) do
      assert(st[f] <= s.process[f], ("group %d %s %d > process %d"):format(
        id, f, st[f], s.process[f]))
    end
  end
  if prev then
    for _, f in ipairs(FIELDS) do
      assert(s.process[f] >= prev.process[f], "process " .. f .. " went down")
    end
    -- the workload drops its groups (handles gone, detached): a group
    -- may die between two snapshots, and one alive in both never goes down
    for id, st in pairs(prev.groups) do
      local now = s.groups[id]
      if now then
        for _, f in ipairs(FIELDS) do
          assert(now[f] >= st[f], ("group %d %s went down"):format(id, f))
        end
        assert(now.ticks >= st.ticks, "ticks went down")
      end
    end
  end
end

local function check()
  -- monitors `work` dropped (its locals) are closed by their finalizers
  collectgarbage()
  collectgarbage()
  local ok, perfmon = pcall(require, "perfmon")
  assert(ok, "require after the failure: " .. tostring(perfmon))
  if MANUAL then pcall(perfmon.event_end) end -- the host's to close
  local open = 0
  for _, m in ipairs(KEEP.monitors) do
    if not m.closed then open = open + 1 end
  end
  local info = perfmon.info()
  assert(info.monitors == open, ("%d monitors open, %d monitor objects open")
    :format(info.monitors, open))
  -- (debug.gethook shows a program's hook only, never perfmon's)
  assert(require("perfmon.core").owns_hook() == (open > 0),
    "perfmon's hook is set with no monitor open, or not with one")
  -- perfmon still measures: a new plugin called 5 times from host code,
  -- each call one event, has exactly 5 ticks
  local env = setmetatable({}, { __index = _G })
  local g = perfmon.group{ name = "check", kind = "plugin" }
  local f = perfmon.load("local n = ... return function(k) local s = 0 for i = 1, k do s = s + i end return s end",
    "=check_plugin", env, g)()
  local mon <close> = perfmon.monitor{ "jank", "ticks" }
  local before = mon:snapshot()
  for _ = 1, 5 do perfmon.event(f, 100) end
  local after = mon:snapshot()
  local d = after:subtract(before)
  assert(d.groups[g.id].ticks == 5, "ticks " .. d.groups[g.id].ticks .. ", expected 5")
  local prev
  for _, s in ipairs(KEEP.snaps) do check_snapshot(s, prev) prev = s end
  check_snapshot(before, prev)
  check_snapshot(after, before)
end

if phase == "work" then
  work()
elseif phase == "check" then
  check()
else
  error("phase: work or check expected, got " .. tostring(phase))
end
