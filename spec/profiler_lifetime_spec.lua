-- perfmon.profiler's lifetime: a profiler kept by a finalizer after its
-- __gc ran, and a restart inside a nested coroutine: either can end the
-- process with SIGSEGV, or leave the signal handler with a freed lua_State,
-- where perfmon gets its lifetime wrong; valgrind.spec.profiler_lifetime_spec
-- runs this file under memcheck, which sees the reads of freed memory that
-- an ordinary run may survive.

local Profiler = require("perfmon.profiler")

-- Runs src in a lua5.4 of its own, ended after `seconds`; returns whether
-- it exited with 0, how it ended, and what it printed.
local function run_script(src, seconds)
  local script, out = os.tmpname(), os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(src)
  f:close()
  local ok, how, code = os.execute(("timeout %d env LUA_PATH_5_4='%s' LUA_CPATH_5_4='%s' lua5.4 '%s' > '%s' 2>&1")
    :format(seconds, package.path, package.cpath, script, out))
  f = assert(io.open(out))
  local text = f:read("a")
  f:close()
  os.remove(script)
  os.remove(out)
  return ok, ("%s %s"):format(how, code), text
end

-- Burns about ms of CPU.
local function spin_for(ms)
  local t0, s = os.clock(), 0
  while (os.clock() - t0) * 1000 < ms do
    for i = 1, 1000 do s = s + i % 7 end
  end
  return s
end

describe("a profiler's lifetime", function()
  it("refuses to start once its __gc has run, and the process ends cleanly", function()
    local ok, how, out = run_script([[
      local P = require("perfmon.profiler")
      do
        local p = P.new()
        local k = setmetatable({}, { __gc = function() SAVED = p end })
      end
      collectgarbage() collectgarbage()
      local started, err = pcall(SAVED.start, SAVED, 100)
      local s = 0
      for i = 1, 2e6 do s = s + i end -- a timer, had it started, would tick here
      print(started, err)
      print(SAVED:is_profiling(), require("perfmon.core").profiler_state(SAVED.core))
      print(SAVED:results().samples, #SAVED:samples())
    ]], 60)
    assert.is_true(ok, how .. "\n" .. out) -- was: SIGSEGV (exit 139) at the end
    local started, err, running, state, samples, n =
      out:match("^(%S+)\t(.-)\n(%S+)\t(%S+)\n(%d+)\t(%d+)\n$")
    assert.are.equal("false", started, out)
    assert.matches("profiler:start: the profiler was collected %(a finalizer kept it after its __gc ran%)", err)
    assert.are.equal("false", running)
    assert.are.equal("collected", state)
    assert.are.equal("0", samples)
    assert.are.equal("0", n)
  end)

  it("keeps sampling the right coroutine after a restart in a nested one", function()
    -- The restart anchors the inner coroutine; a patched coroutine.resume
    -- that put back the one it found running (X) would leave X, dropped,
    -- to be freed while the signal handler sets hooks on it.
    local p = Profiler.new()
    local X = coroutine.create(function()
      p:start(100)
      coroutine.resume(coroutine.create(function() p:stop() p:start(100) end))
    end)
    assert.is_true(coroutine.resume(X))
    X = nil
    collectgarbage()
    collectgarbage()
    spin_for(300)
    local r = p:results()
    p:stop()
    assert.is_true(r.samples > 0, "no sample of the main thread")
    local threads = {}
    for _, s in ipairs(p:samples()) do threads[s.thread] = true end
    assert.is_true(threads[1], "the main thread was never sampled")
  end)
end)
