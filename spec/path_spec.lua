-- The hook has two ways to a frame's function and caller: the fast one reads
-- Lua 5.4's CallInfo (checked against the public API at start-up), the public
-- one calls lua_getinfo and lua_getstack.  Every spec runs on both (ctest's
-- spec.*.public tests set PERFMON_PATH=public); this one checks which path is
-- in use and that both attribute a workload identically.

local perfmon = require("perfmon")

local WORKLOAD = [=[
  local perfmon = require("perfmon")
  local groups, fns = {}, {}
  for i = 1, 5 do
    groups[i] = perfmon.group{ name = "p" .. i, kind = "plugin" }
    local env = setmetatable({}, { __index = _G })
    fns[i] = assert(perfmon.load([[
      local depth = ...
      local function rec(n) if n > 0 then return rec(n - 1) + 1 end return 0 end
      local co = coroutine.wrap(function() while true do coroutine.yield(rec(3)) end end)
      return function(callback)
        rec(depth)
        co()
        if callback then callback() end
        pcall(error, "x")
        return select("#", rec(2))
      end]], "=path_p" .. i, env, groups[i]))(i * 3)
  end
  local mon = perfmon.monitor{ "ticks" }
  for round = 1, 50 do
    perfmon.event(function()
      for i = 1, 5 do
        fns[i](fns[i % 5 + 1] and function() fns[i % 5 + 1]() end)
      end
    end)
  end
  local snap = mon:snapshot()
  local out = {}
  for i = 1, 5 do out[i] = snap.groups[groups[i].id].ticks end
  out[#out + 1] = snap.process.ticks
  io.write(table.concat(out, " "))
]=]

local function run(path)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(WORKLOAD)
  f:close()
  local cmd = ("PERFMON_PATH=%s LUA_PATH_5_4=%q LUA_CPATH_5_4=%q lua5.4 %s 2>&1")
    :format(path, package.path, package.cpath, script)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  os.remove(script)
  return out
end

describe("the hook's path", function()
  it("is the one PERFMON_PATH asks for, and fast by default on this Lua", function()
    local want = os.getenv("PERFMON_PATH") == "public" and "public" or "fast"
    assert.are.equal(want, perfmon.info().path)
  end)

  it("attributes a workload identically on both paths", function()
    local fast, public = run("fast"), run("public")
    assert.matches("^[%d ]+$", fast)
    -- every group is entered once by the host and once from its neighbour's
    -- callback per event: 100 ticks each, 50 events
    assert.are.equal("100 100 100 100 100 50", fast)
    assert.are.equal(fast, public)
  end)
end)
