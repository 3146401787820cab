-- spec/source_spec.lua -- groups by source: perfmon.attach_source.
--
-- A host whose plugins share _G (Lite XL: files and folders under plugins/,
-- loaded with require) cannot attach a plugin's environment: there is one.
-- attach_source(prefix, group) puts every chunk whose path begins with
-- prefix in the group, in addition to its environment's groups: the
-- plugin's own files, the modules it loads with plain require, chunks
-- loaded before the call and functions already run.  Every figure is
-- checked against CPU time measured here with os.clock.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")

-- A throwaway plugins/ tree: a/init.lua (requires a.util), a/util.lua and
-- b.lua, each with a busy loop of its own, all sharing _G.
local function plugin_tree()
  local root = os.tmpname()
  os.remove(root)
  assert(os.execute(("mkdir -p '%s/plugins/a'"):format(root)))
  local function write(path, text)
    local f = assert(io.open(root .. "/plugins/" .. path, "w"))
    f:write(text)
    f:close()
  end
  local spin = "local function spin(ms) local t = os.clock() + ms / 1000 "
    .. "while os.clock() < t do end end\n"
  write("a/init.lua", spin .. [[
    local util = require("a.util")
    return function(ms) spin(ms / 2) util.work(ms / 2) end]])
  write("a/util.lua", spin .. "return { work = function(ms) spin(ms) end }")
  write("b.lua", spin .. "return function(ms) spin(ms) end")
  return root
end

local function host_spin(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do end
end

local function cpu(d, g) return d.groups[g.id].cpu_us end

describe("perfmon.attach_source", function()
  local root, saved_path

  before_each(function()
    root = plugin_tree()
    saved_path = package.path
    package.path = root .. "/plugins/?.lua;" .. root .. "/plugins/?/init.lua;" .. package.path
  end)

  after_each(function()
    package.path = saved_path
    package.loaded["a"], package.loaded["a.util"], package.loaded["b"] = nil, nil, nil
    os.execute(("rm -rf '%s'"):format(root))
  end)

  it("groups a plugin's files by folder, loaded before and after, and the modules it requires", function()
    local a = require("a") -- loaded and run before any group or monitor
    a(2)
    local A = perfmon.group{ name = "a", kind = "plugin" }
    local B = perfmon.group{ name = "b", kind = "plugin" }
    local m <close> = perfmon.monitor{ "jank", "ticks" }
    a(2) -- cached before the attach: resolved again after it
    perfmon.attach_source(root .. "/plugins/a/", A)
    perfmon.attach_source(root .. "/plugins/b.lua", B)
    local b = require("b") -- loaded after the attach
    local s0 = m:snapshot()
    local ta, tb = os.clock(), nil
    perfmon.event(function()
      a(20)
      ta = (os.clock() - ta) * 1e6
      tb = os.clock()
      b(10)
      tb = (os.clock() - tb) * 1e6
      host_spin(15)
    end)
    local d = m:snapshot():subtract(s0)
    truth.assert_near(cpu(d, A), ta, "a (its init and its util)")
    truth.assert_near(cpu(d, B), tb, "b")
    assert.equals(1, d.groups[A.id].ticks)
    assert.equals(1, d.groups[B.id].ticks)
  end)

  it("nests prefixes: a set holds every group whose prefix matches", function()
    local ALL = perfmon.group{ name = "plugins", kind = "folder" }
    local A = perfmon.group{ name = "a", kind = "plugin" }
    perfmon.attach_source(root .. "/plugins/", ALL)
    perfmon.attach_source(root .. "/plugins/a/", A)
    local a, b = require("a"), require("b")
    local m <close> = perfmon.monitor{ "jank" }
    local s0 = m:snapshot()
    local t0 = os.clock()
    a(20)
    local ta = (os.clock() - t0) * 1e6
    b(10)
    local tall = (os.clock() - t0) * 1e6
    host_spin(10)
    local d = m:snapshot():subtract(s0)
    truth.assert_near(cpu(d, A), ta, "a")
    truth.assert_near(cpu(d, ALL), tall, "plugins/ (a and b)")
    perfmon.detach_source(root .. "/plugins/", ALL)
    perfmon.detach_source(root .. "/plugins/a/", A)
  end)

  it("stops charging a prefix once detached, and lets several prefixes name one group", function()
    local G = perfmon.group{ name = "a and b", kind = "plugin" }
    perfmon.attach_source(root .. "/plugins/a/", G)
    perfmon.attach_source(root .. "/plugins/b.lua", G)
    local a, b = require("a"), require("b")
    local m <close> = perfmon.monitor{ "jank" }
    local s0 = m:snapshot()
    local t0 = os.clock()
    a(10)
    b(10)
    local both = (os.clock() - t0) * 1e6
    local s1 = m:snapshot()
    truth.assert_near(cpu(s1:subtract(s0), G), both, "a and b")
    assert.is_true(perfmon.detach_source(root .. "/plugins/a/", G))
    assert.is_false(perfmon.detach_source(root .. "/plugins/a/", G))
    a(10)
    local t1 = os.clock()
    b(10)
    local only_b = (os.clock() - t1) * 1e6
    truth.assert_near(cpu(m:snapshot():subtract(s1), G), only_b, "b alone after a's detach")
    perfmon.detach_source(root .. "/plugins/b.lua", G)
  end)

  it("matches a string chunk by its chunk name without the leading =", function()
    local G = perfmon.group{ name = "inline", kind = "plugin" }
    perfmon.attach_source("inline/", G)
    local f = assert(load("local t = os.clock() + 0.01 while os.clock() < t do end", "=inline/x"))
    local other = assert(load("local t = os.clock() + 0.01 while os.clock() < t do end", "=elsewhere"))
    local m <close> = perfmon.monitor{ "jank" }
    local s0 = m:snapshot()
    local t0 = os.clock()
    f()
    local tf = (os.clock() - t0) * 1e6
    other()
    truth.assert_near(cpu(m:snapshot():subtract(s0), G), tf, "inline/x only")
    perfmon.detach_source("inline/", G)
  end)

  it("rejects bad arguments, naming them", function()
    local G = perfmon.group{ name = "g", kind = "plugin" }
    local cases = {
      { { "", G }, "bad argument #1 to 'perfmon.attach_source' (the prefix is empty)" },
      { { "a\0b", G }, "bad argument #1 to 'perfmon.attach_source' (the prefix holds a NUL byte)" },
      { { nil, G }, "bad argument #1 to 'perfmon.attach_source' (string expected, got nil)" },
      { { {}, G }, "bad argument #1 to 'perfmon.attach_source' (string expected, got table)" },
      { { "x", {} }, "bad argument #2 to 'perfmon.attach_source' (perfmon.group expected, got table)" },
      { { "x" }, "bad argument #2 to 'perfmon.attach_source' (perfmon.group expected, got nil)" },
    }
    -- (Lua names the function by the first table of package.loaded it
    -- finds it in: perfmon, perfmon.core or perfmon.loader)
    local function same(want, got)
      assert.equals(want, (got:gsub("'perfmon%.%a+%.", "'perfmon.")))
    end
    for _, c in ipairs(cases) do
      local ok, err = pcall(perfmon.attach_source, table.unpack(c[1], 1, 2))
      assert.is_false(ok)
      same(c[2], err)
    end
    local ok, err = pcall(perfmon.detach_source, "", G)
    assert.is_false(ok)
    same("bad argument #1 to 'perfmon.detach_source' (the prefix is empty)", err)
  end)
end)

-- Paths as users write them: a chunk's path and a prefix are compared
-- once both are normalised (absolute, without ".", ".." or repeated '/',
-- symlinks resolved where the file exists).  Each chunk below is a real
-- file under a throwaway tree with a symlink to a folder and one to a
-- file; its CPU time is measured here with os.clock.
describe("perfmon.attach_source, paths as users write them", function()
  local root

  local SPIN = "local ms = ... local t = os.clock() + ms / 1000 while os.clock() < t do end"

  local function write(path, text)
    local f = assert(io.open(root .. "/" .. path, "w"))
    f:write(text or SPIN)
    f:close()
  end

  -- root, as a path relative to the working directory: "../" up to / and
  -- down again
  local function relative(path)
    local p = assert(io.popen("pwd -P"))
    local cwd = p:read("l")
    p:close()
    local _, depth = cwd:gsub("/[^/]+", "")
    return ("../"):rep(depth) .. path:sub(2)
  end

  before_each(function()
    root = os.tmpname()
    os.remove(root)
    assert(os.execute(("mkdir -p '%s/real/plugins' '%s/real/other' '%s/elsewhere'"):format(root, root, root)))
    assert(os.execute(("ln -s real '%s/link'"):format(root)))
    write("elsewhere/target.lua")
    assert(os.execute(("ln -s ../../elsewhere/target.lua '%s/real/plugins/linked.lua'"):format(root)))
  end)

  after_each(function()
    os.execute(("rm -rf '%s'"):format(root))
  end)

  -- Runs f(ms) under m; returns the CPU time measured and the snapshot's
  -- difference.
  local function run(m, f, ms)
    local s0 = m:snapshot()
    local t0 = os.clock()
    f(ms)
    local t = (os.clock() - t0) * 1e6
    return t, m:snapshot():subtract(s0)
  end

  local function charged(d, g)
    local s = d.groups[g.id]
    return s and s.cpu_us or 0
  end

  it("matches a chunk loaded by a relative, ./, ../, doubled-slash or symlinked path", function()
    local P = perfmon.group{ name = "plugins", kind = "folder" }
    perfmon.attach_source(root .. "/real/plugins/", P)
    local rel = relative(root)
    local ways = {
      { "relative", rel .. "/real/plugins/a.lua" },
      { "./", "./" .. rel .. "/real/plugins/b.lua" },
      { "../", root .. "/real/other/../plugins/c.lua" },
      { "doubled /", root .. "//real///plugins//d.lua" },
      { "symlinked folder", root .. "/link/plugins/e.lua" },
    }
    for _, w in ipairs(ways) do
      write("real/plugins/" .. w[2]:match("(%a)%.lua$") .. ".lua")
    end
    write("real/other/host.lua")
    local m <close> = perfmon.monitor{ "jank" }
    for _, w in ipairs(ways) do
      local f = assert(loadfile(w[2]))
      local t, d = run(m, f, 15)
      truth.assert_near(charged(d, P), t, w[1] .. " (" .. w[2] .. ")")
    end
    -- a file beside the folder is not in it, however written
    local _, d = run(m, assert(loadfile(root .. "/real/plugins/../other/host.lua")), 15)
    assert.equals(0, charged(d, P))
    perfmon.detach_source(root .. "/real/plugins/", P)
  end)

  it("puts a symlinked file in the folder of the link and in its target's", function()
    local P = perfmon.group{ name = "plugins", kind = "folder" }
    local T = perfmon.group{ name = "checkout", kind = "folder" }
    perfmon.attach_source(root .. "/real/plugins/", P)
    perfmon.attach_source(root .. "/elsewhere/", T)
    local m <close> = perfmon.monitor{ "jank" }
    local t, d = run(m, assert(loadfile(root .. "/real/plugins/linked.lua")), 15)
    truth.assert_near(charged(d, P), t, "the link's folder")
    truth.assert_near(charged(d, T), t, "the target's folder")
    -- loaded by its target's path, it is the target's alone
    t, d = run(m, assert(loadfile(root .. "/elsewhere/target.lua")), 15)
    truth.assert_near(charged(d, T), t, "the target's folder, loaded there")
    assert.equals(0, charged(d, P))
    perfmon.detach_source(root .. "/real/plugins/", P)
    perfmon.detach_source(root .. "/elsewhere/", T)
  end)

  it("normalises the prefix too: relative, ./, doubled slashes and symlinks", function()
    local rel = relative(root)
    local cases = {
      { "relative", rel .. "/real/plugins/a" },
      { "./ and doubled /", "./" .. rel .. "//real/plugins//b" },
      { "symlinked folder", root .. "/link/plugins/c" },
      { "../", root .. "/link/other/../plugins/d" },
      { "symlinked file", root .. "/real/plugins/linked.lua" },
    }
    local m <close> = perfmon.monitor{ "jank" }
    for i, c in ipairs(cases) do
      local G = perfmon.group{ name = c[1], kind = "plugin" }
      perfmon.attach_source(c[2], G)
      -- the chunk is loaded by its real path; the prefix names it through
      -- the forms above (plain prefixes: ".../a" covers ".../a.lua")
      local file = i < #cases and ("real/plugins/%s.lua"):format(c[2]:sub(-1))
        or "elsewhere/target.lua"
      if i < #cases then write(file) end
      local t, d = run(m, assert(loadfile(root .. "/" .. file)), 15)
      truth.assert_near(charged(d, G), t, c[1] .. " (" .. c[2] .. ")")
      assert.is_true(perfmon.detach_source(c[2], G))
    end
  end)

  it("matches chunk names that are not paths as written", function()
    local G = perfmon.group{ name = "names", kind = "plugin" }
    perfmon.attach_source("./x/", G)
    local named = assert(load(SPIN, "=./x/y"))
    local other = assert(load(SPIN, "=x/y"))
    local m <close> = perfmon.monitor{ "jank" }
    local t, d = run(m, named, 15)
    truth.assert_near(charged(d, G), t, "=./x/y")
    local _, d2 = run(m, other, 15)
    assert.equals(0, charged(d2, G))
    perfmon.detach_source("./x/", G)
  end)

  local function unmatched(g)
    for _, u in ipairs(perfmon.info().unmatched_sources) do
      if u.id == g.id then return u end
    end
  end

  it("reports a prefix no chunk run has matched in perfmon.info()", function()
    local TYPO = perfmon.group{ name = "typo", kind = "plugin" }
    local OK = perfmon.group{ name = "ok", kind = "plugin" }
    perfmon.attach_source(root .. "/real/plugnis/", TYPO)
    perfmon.attach_source(root .. "/real/plugins/", OK)
    write("real/plugins/a.lua")
    local f = assert(loadfile(root .. "/real/plugins/a.lua"))
    -- nothing of OK's has run yet: both are reported
    assert.same({ prefix = root .. "/real/plugnis/", group = "typo", id = TYPO.id }, unmatched(TYPO))
    assert.same({ prefix = root .. "/real/plugins/", group = "ok", id = OK.id }, unmatched(OK))
    local m <close> = perfmon.monitor{ "jank" }
    local t, d = run(m, f, 10)
    truth.assert_near(charged(d, OK), t, "ok")
    assert.equals(0, charged(d, TYPO))
    assert.is_nil(unmatched(OK))
    assert.is_not_nil(unmatched(TYPO))
    perfmon.detach_source(root .. "/real/plugnis/", TYPO)
    assert.is_nil(unmatched(TYPO))
    perfmon.detach_source(root .. "/real/plugins/", OK)
  end)

  it("keeps 20,000 prefixes apart", function()
    local groups = {}
    for i = 1, 20000 do
      groups[i] = perfmon.group{ name = "p" .. i, kind = "plugin" }
      perfmon.attach_source(("%s/many/p%d/"):format(root, i), groups[i])
    end
    local picked = { 1, 2, 10, 99, 100, 1000, 12345, 19999, 20000 }
    local m <close> = perfmon.monitor{ "jank" }
    for _, i in ipairs(picked) do
      -- no such file: the path is normalised as far as it exists
      local f = assert(load(SPIN, ("@%s/many/p%d/init.lua"):format(root, i)))
      local t, d = run(m, f, 5)
      truth.assert_near(charged(d, groups[i]), t, "p" .. i)
      for _, j in ipairs{ i - 1, i + 1, i * 10, i * 10 + 1 } do
        if groups[j] then assert.equals(0, charged(d, groups[j])) end
      end
    end
    for i = 1, 20000 do
      assert.is_true(perfmon.detach_source(("%s/many/p%d/"):format(root, i), groups[i]))
    end
  end)

  it("keeps the 32 longest prefixes' groups when more match", function()
    local base = root .. "/deep/"
    local groups = {}
    for k = 0, 39 do
      groups[k] = perfmon.group{ name = "prefix of " .. k, kind = "folder" }
      perfmon.attach_source(base .. ("a"):rep(k), groups[k])
    end
    local f = assert(load(SPIN, "@" .. base .. ("a"):rep(40) .. ".lua"))
    local m <close> = perfmon.monitor{ "jank" }
    local t, d = run(m, f, 15)
    for k = 0, 39 do
      if k >= 8 then
        truth.assert_near(charged(d, groups[k]), t, "prefix of " .. k)
      else
        assert.equals(0, charged(d, groups[k]), "prefix of " .. k)
      end
      perfmon.detach_source(base .. ("a"):rep(k), groups[k])
    end
  end)

  it("rejects a prefix too long to be a path", function()
    local G = perfmon.group{ name = "g", kind = "plugin" }
    local ok, err = pcall(perfmon.attach_source, ("x"):rep(1024), G)
    assert.is_false(ok)
    assert.matches("bad argument #1 to '[%w.]*attach_source' "
      .. "%(the prefix is longer than 1023 bytes as an absolute path%)", err)
  end)
end)
