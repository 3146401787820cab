-- mod-version:3
-- The check's scripted session: opens PERFMON_CHECK_DOC, types a text into
-- it one character per pass of the threads, opens about:performance and
-- saves a profile (when perfmon is loaded), waits for the bursts of the
-- janky plugins (janky, apijanky) and the warnings they raise, writes what
-- it saw to PERFMON_CHECK_OUT and quits; where perfmon failed to start,
-- only whether its failure still shows after a message's time.  Every wait
-- is bounded in passes.
local core = require "core"
local command = require "core.command"

local OUT, DOC = os.getenv("PERFMON_CHECK_OUT"), os.getenv("PERFMON_CHECK_DOC")
local TEXT = ("local function f(x)\n  return x * 2 -- typed by the check\nend\n"):rep(8)
local MAX_WAIT_PASSES = 1000
local JANKY = { "janky", "apijanky" } -- plugins that count their bursts

local function wait(passes, s, until_fn)
  for _ = 1, passes do
    if until_fn and until_fn() then return true end
    coroutine.yield(s)
  end
  return until_fn == nil
end

-- perfmon failed to start: whether its failure is still in the status bar
-- after a message would have gone (config.message_timeout), and gone once
-- clicked
local function report_failure(out, pm)
  local config = require "core.config"
  wait(math.ceil((config.message_timeout + 1) / 0.1), 0.1)
  out:write(("failure %s\n"):format(pm.failure))
  local item = core.status_view:get_item("perfmon:failure")
  out:write(("failure_shown %s\n"):format(item ~= nil))
  if item and item.on_click then item.on_click(1, item.x, 0) end
  out:write(("failure_dismissed %s\n"):format(core.status_view:get_item("perfmon:failure") == nil))
end

core.add_thread(function()
  local out = assert(io.open(OUT, "w"))
  local failed = package.loaded["plugins.perfmon"]
  if failed and failed.failure then
    report_failure(out, failed)
    out:write(("cpu %.6f\n"):format(os.clock()))
    out:close()
    core.quit(true)
    return
  end
  local doc = core.open_doc(DOC)
  core.root_view:open_doc(doc)
  for i = 1, #TEXT do
    local c = TEXT:sub(i, i)
    if c == "\n" then command.perform("doc:newline") else core.root_view:on_text_input(c) end
    coroutine.yield(0.01)
  end
  -- the editor's CPU time for the session so far, the same with perfmon
  -- and without: check's cost
  out:write(("typed %d %d %.6f\n"):format(#TEXT, #doc.lines, os.clock()))

  for _, name in ipairs(JANKY) do
    local janky = package.loaded["plugins." .. name]
    if janky then
      out:write(("%s_done %s\n"):format(name, wait(MAX_WAIT_PASSES, 0.02, function() return janky.done end)))
    end
  end
  local pm = package.loaded["plugins.perfmon"]
  if pm then
    -- the view in a window of 1024 by 768 px, the tree view beside it: the
    -- columns it draws there, the busiest plugin's row (the first that is
    -- not core) as drawn, selected, its histogram below
    system.set_window_size(1024, 768, 0, 0)
    command.perform("perfmon:show-performance")
    wait(60, 0.02) -- the alerts' buffering delay, the warnings' delivery
    local view = core.active_view
    local first
    for _, cells in ipairs(view.drawn or {}) do
      if cells.key ~= "core" then
        first = cells
        break
      end
    end
    if first then
      for i, line in ipairs(view.listing.lines) do
        if line.key == first.key then view.listing:select(i) end
      end
      core.redraw = true
    end
    local titles = {}
    for _, c in ipairs(view.cols or {}) do titles[#titles + 1] = c.key end
    out:write(("view %s %s\n"):format(view:get_name(), first and first.key))
    out:write(("view_columns %.0f %s\n"):format(view.size.x, table.concat(titles, " ")))
    out:write(("view_row %s\n"):format(table.concat(first or {}, " | ")))
    for _, line in ipairs(view.listing.lines) do
      if line.kind == "fold" then out:write(("view_idle %d\n"):format(line.count)) end
    end
    -- check's screenshot: it takes one when asked, while the view shows
    local ready, shot = os.getenv("PERFMON_CHECK_READY"), os.getenv("PERFMON_CHECK_SHOT_DONE")
    if ready and shot then
      wait(10, 0.02)
      io.open(ready, "w"):close()
      out:write(("view_shot %s\n"):format(wait(MAX_WAIT_PASSES, 0.02, function()
        local f = io.open(shot)
        if f then f:close() end
        return f ~= nil
      end)))
    end
    command.perform("perfmon:save-profile")
    out:write(("route %s\n"):format(pm.route))
    out:write(("core %s\n"):format(pm.core))
    out:write(("path %s\n"):format(require("perfmon").info().path))
    for _, w in ipairs(pm.warnings) do out:write(("warned %s %s\n"):format(w.name, w.message)) end
    local snap = pm.monitor:snapshot()
    for _, g in ipairs(pm.groups) do
      local st = snap.groups[g.id]
      out:write(("self %s %d %d %s\n"):format(g.name, st.self_us, st.cpu_us,
        table.concat(st.self_durations, ",")))
    end
    io.write(pm.text())
  end
  for _, name in ipairs(JANKY) do
    local janky = package.loaded["plugins." .. name]
    if janky then
      out:write(("clock %s %d %d\n"):format(name, math.floor(janky.burned_s * 1e6 + 0.5), janky.bursts))
    end
  end
  for _, item in ipairs(core.log_items) do
    if item.level ~= "INFO" or item.text:match("^perfmon") then
      out:write(("log %s %s\n"):format(item.level, item.text:gsub("\n", " ")))
    end
  end
  out:write(("cpu %.6f\n"):format(os.clock()))
  out:close()
  core.quit(true)
end)
