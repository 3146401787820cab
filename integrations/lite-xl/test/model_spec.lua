-- The Lite XL plugin's editor-free logic (perfmon/model.lua): which group a
-- chunk's path belongs to, and the about:performance rows.  ctest
-- lite-xl.model runs it from the repository root; CI has no Lite XL, the
-- check script runs the rest in a real one.  Figures are checked against
-- CPU time measured here with os.clock, on real files of a plugins tree.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")
local model = dofile("integrations/lite-xl/perfmon/model.lua")
local text_table = require("perfmon.table")

-- A data directory and a user directory as Lite XL lays them out, each file
-- a chunk that spins, in its own code, the ms it is given.
local function lite_tree()
  local root = os.tmpname()
  os.remove(root)
  local data, user = root .. "/share/lite-xl", root .. "/config/lite-xl"
  local files = {
    data .. "/core/init.lua", data .. "/core/doc/init.lua",
    data .. "/plugins/lsp/init.lua", data .. "/plugins/lsp/server.lua",
    data .. "/plugins/lsp_snippets.lua", data .. "/plugins/treeview.lua",
    user .. "/plugins/treeview.lua", user .. "/init.lua",
  }
  for _, path in ipairs(files) do
    assert(os.execute(("mkdir -p '%s'"):format(path:match("^(.*)/"))))
    local f = assert(io.open(path, "w"))
    f:write("return function(ms) local t = os.clock() + ms / 1000 while os.clock() < t do end end\n")
    f:close()
  end
  return root, data, user, files
end

-- The entries of dir/plugins as the plugin lists them: a folder ends in /.
local function plugin_entries(dir)
  local p = assert(io.popen(("cd '%s/plugins' && ls -p"):format(dir)))
  local entries = {}
  for entry in p:lines() do entries[#entries + 1] = dir .. "/plugins/" .. entry end
  p:close()
  return entries
end

describe("lite-xl model.group_of", function()
  local D, U = "/usr/share/lite-xl", "/home/u/.config/lite-xl"

  it("names the plugin of a file or of anything in a folder, and core", function()
    local cases = {
      { U .. "/plugins/lsp/init.lua", "lsp", U .. "/plugins/lsp/" },
      { U .. "/plugins/lsp/server/json.lua", "lsp", U .. "/plugins/lsp/" },
      { U .. "/plugins/lsp/", "lsp", U .. "/plugins/lsp/" },
      { U .. "/plugins/lsp_snippets.lua", "lsp_snippets", U .. "/plugins/lsp_snippets.lua" },
      { D .. "/plugins/treeview.lua", "treeview", D .. "/plugins/treeview.lua" },
      { D .. "/core/doc/init.lua", "core", D .. "/core/" },
      { D .. "/core/", "core", D .. "/core/" },
      { [[C:\lite-xl\data\plugins\lsp\init.lua]], "lsp", [[C:\lite-xl\data\plugins\lsp\]],
        [[C:\lite-xl\data]], [[C:\Users\u\.config\lite-xl]] },
    }
    for _, c in ipairs(cases) do
      local name, prefix = model.group_of(c[1], c[4] or D, c[5] or U)
      assert.are.same({ c[2], c[3] }, { name, prefix }, c[1])
    end
  end)

  it("is nothing outside plugins/ and the data directory's core/", function()
    for _, path in ipairs {
      U .. "/init.lua", U .. "/core/init.lua", U .. "/plugins/README.md",
      D .. "/colors/default.lua", D .. "-old/core/init.lua", "/usr/share/lua/5.4/perfmon/init.lua",
    } do
      assert.is_nil(model.group_of(path, D, U), path)
    end
  end)

  it("lets the deeper root decide when the user directory is inside the data directory", function()
    local name, prefix = model.group_of("/opt/lite/user/plugins/x.lua", "/opt/lite", "/opt/lite/user")
    assert.are.same({ "x", "/opt/lite/user/plugins/x.lua" }, { name, prefix })
    assert.is_nil(model.group_of("/opt/lite/user/core/init.lua", "/opt/lite", "/opt/lite/user"))
  end)

  it("names a bad argument", function()
    assert.has_error(function() model.group_of(nil, D, U) end,
      "bad argument #1 to 'group_of' (non-empty string expected, got nil)")
    assert.has_error(function() model.group_of("/x", "", U) end,
      "bad argument #2 to 'group_of' (non-empty string expected, got an empty string)")
    assert.has_error(function() model.group_of("/x", D, 3) end,
      "bad argument #3 to 'group_of' (non-empty string expected, got number)")
  end)
end)

describe("lite-xl model, on a real plugins tree", function()
  local root, data, user, files

  before_each(function() root, data, user, files = lite_tree() end)
  after_each(function() os.execute(("rm -rf '%s'"):format(root)) end)

  -- Attaches groups as the plugin does (the user's copy of a plugin and
  -- the data directory's are one group), runs every file's chunk in an
  -- event of its own for ms[path], and returns the groups, the delta of
  -- the run and the CPU each group's files spun by os.clock; mode is the
  -- monitor's (exact by default).
  local function run(ms, mode)
    local groups, by_name = {}, {}
    local function attach(name, prefix)
      if not by_name[name] then
        by_name[name] = perfmon.group { name = name, kind = "plugin" }
        groups[#groups + 1] = by_name[name]
      end
      perfmon.attach_source(prefix, by_name[name])
    end
    attach(model.group_of(data .. "/core/", data, user))
    for _, dir in ipairs { data, user } do
      for _, path in ipairs(plugin_entries(dir)) do
        local name, prefix = model.group_of(path, data, user)
        if name then attach(name, prefix) end
      end
    end
    local m <close> = perfmon.monitor { "jank", "ticks", mode = mode }
    local s0 = m:snapshot()
    local spun = {}
    for _, path in ipairs(files) do
      local fn = assert(loadfile(path))()
      local t0 = os.clock()
      perfmon.event(fn, ms[path] or 1)
      local name = model.group_of(path, data, user) or "(none)"
      spun[name] = (spun[name] or 0) + (os.clock() - t0) * 1e6
    end
    return groups, by_name, m:snapshot():subtract(s0), spun
  end

  it("charges each plugin's files, and only them, to its group", function()
    local groups, by_name, d, spun = run {
      [data .. "/plugins/lsp/init.lua"] = 10, [data .. "/plugins/lsp/server.lua"] = 15,
      [data .. "/plugins/lsp_snippets.lua"] = 20, [user .. "/plugins/treeview.lua"] = 20,
      [data .. "/core/doc/init.lua"] = 12, [user .. "/init.lua"] = 8,
    }
    local names = {}
    for _, g in ipairs(groups) do names[#names + 1] = g.name end
    table.sort(names)
    assert.are.same({ "core", "lsp", "lsp_snippets", "treeview" }, names)
    for name, g in pairs(by_name) do
      truth.assert_near(d.groups[g.id].self_us, spun[name], name)
    end
    -- both files of the folder: each entered as a chunk, then called
    assert.equals(4, d.groups[by_name.lsp.id].ticks)
  end)

  it("ranks the rows by self time and shows the snapshot's figures", function()
    local groups, by_name, d = run {
      [data .. "/plugins/lsp/server.lua"] = 30, [user .. "/plugins/treeview.lua"] = 12,
      [data .. "/plugins/lsp_snippets.lua"] = 3,
    }
    local rows = model.rows(d, groups)
    assert.equals(#groups, #rows)
    assert.equals("lsp", rows[1].name) -- 30 ms, then treeview's 12 + 1
    for i, r in ipairs(rows) do
      local st = d.groups[by_name[r.name].id]
      assert.are.same({ st.self_us, st.cpu_us, st.ticks }, { r.self_us, r.cpu_us, r.ticks })
      assert.are.same(st.self_durations, r.durations)
      assert.near(100 * st.self_us / d.process.cpu_us, r.share, 1e-9)
      if i > 1 then assert.is_true(rows[i - 1].self_us >= r.self_us) end
      -- the histogram's buckets, each on its own, add up to the snapshot's
      local sd = st.self_durations
      for lo, hi, n in r.histogram:gmatch("(%d+)%-(%d+):(%d+)") do
        local k = math.floor(math.log(tonumber(lo), 2)) + 1
        assert.equals(2 ^ k, tonumber(hi))
        assert.equals(sd[k] - (sd[k + 1] or 0), tonumber(n), r.name .. " " .. lo .. "-" .. hi)
      end
    end
    -- a 30 ms event of lsp's own time lands at 16 ms or over
    local lo = tonumber(rows[1].longest:match("^(%d+)"))
    assert.is_true(lo >= 16, rows[1].longest)

    local lines = {}
    for line in model.text(rows, d):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equals(#rows + 2, #lines)
    assert.matches("^plugin%s+self ms%s+cpu ms%s+share%s+ticks%s+longest", lines[1])
    for i, r in ipairs(rows) do
      assert.equals(r.name, lines[i + 1]:match("^(%S+)"))
      assert.equals(text_table.figure(r.self_us / 1000), lines[i + 1]:match("^%S+%s+(%S+)"))
    end
    assert.matches("^%(whole editor%)%s+[%d.]+%s+[%d.]+%s+100%.0%%", lines[#lines])
  end)

  it("counts each plugin's samples instead of its ticks under a sampled monitor", function()
    local groups, by_name, d = run({
      [data .. "/plugins/lsp/server.lua"] = 60, [user .. "/plugins/treeview.lua"] = 30,
    }, "sampled")
    local rows = model.rows(d, groups)
    assert.equals("lsp", rows[1].name)
    assert.is_true(rows[1].samples > 0, "no sample in lsp's 60 ms")
    local lines = {}
    for line in model.text(rows, d, "samples"):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.matches("^plugin%s+self ms%s+cpu ms%s+share%s+samples%s+longest", lines[1])
    for i, r in ipairs(rows) do
      assert.equals(d.groups[by_name[r.name].id].self_samples, r.samples)
      assert.equals(tostring(r.samples), lines[i + 1]:match("^%S+%s+%S+%s+%S+%s+%S+%s+(%d+)"))
    end
    assert.equals(tostring(d.process.self_samples),
      lines[#lines]:match("^%(whole editor%)%s+%S+%s+%S+%s+%S+%s+(%d+)"))
  end)

  it("shows where each plugin's time went in the profiler's samples", function()
    local where = require("perfmon.where")
    local p = require("perfmon.profiler").new()
    p:start(1000)
    local groups, by_name, d, spun = run {
      [data .. "/plugins/lsp/server.lua"] = 120, [user .. "/plugins/treeview.lua"] = 60,
    }
    p:stop()
    local places = where.find_all(p, 0)
    local rows = model.rows(d, groups, places)
    local row = {}
    for _, r in ipairs(rows) do row[r.name] = r end
    -- their own code, the line of the loop, nearly all of their samples
    assert.matches("^function at .*plugins/lsp/server%.lua:1 %(%d+%%%)$", row.lsp.hottest)
    assert.matches("^function at .*plugins/treeview%.lua:1 %(%d+%%%)$", row.treeview.hottest)
    truth.assert_near(places[by_name.lsp.id].us, spun.lsp, "lsp's samples")
    -- lsp_snippets spun 1 ms: too few samples to say, or none at all
    local h = row.lsp_snippets.hottest
    assert.is_true(h == "-" or h:match("^too few samples %(%d%)$") ~= nil, h)
    local lines = {}
    for line in model.text(rows, d):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.matches("self jank histogram %(ms:events%)%s+hottest %(the profiler's samples%)$", lines[1])
    for i, r in ipairs(rows) do
      assert.equals(r.hottest, lines[i + 1]:sub(-#r.hottest))
    end
    assert.has_error(function() model.rows(d, groups, "x") end,
      "bad argument #3 to 'rows' (where.find_all's result expected, got string)")
  end)

  it("names a bad argument", function()
    local g = perfmon.group { name = "x", kind = "plugin" }
    local m <close> = perfmon.monitor { "jank" }
    local snap = m:snapshot()
    assert.has_error(function() model.rows(nil, { g }) end,
      "bad argument #1 to 'rows' (perfmon snapshot expected, got nil)")
    assert.has_error(function() model.rows(snap, "x") end,
      "bad argument #2 to 'rows' (list of perfmon groups expected, got string)")
    assert.has_error(function() model.text({}, 1) end,
      "bad argument #2 to 'text' (perfmon snapshot expected, got number)")
    assert.has_error(function() model.text({}, snap, "calls") end,
      "bad argument #3 to 'text' (\"ticks\" or \"samples\" expected, got \"calls\")")
  end)
end)
