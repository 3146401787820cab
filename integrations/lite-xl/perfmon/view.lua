-- The performance view: a Lite XL View of the plugins' figures, a column
-- per figure (columns.lua fits them to the view's width), the plugins by
-- self time with the idle ones folded (listing.lua), refreshed while it is
-- shown, and below, the selected line's figures and the histogram of its
-- events by its own time.  This file draws and takes the keys and the
-- mouse; what it draws comes from the editor-free modules beside it.

local core = require "core"
local common = require "core.common"
local command = require "core.command"
local keymap = require "core.keymap"
local style = require "core.style"
local View = require "core.view"

local here = (...):match("^(.*)%.[^.]+$")
local columns = require(here .. ".columns")
local listing = require(here .. ".listing")
local model = require(here .. ".model")

local PerformanceView = View:extend()

PerformanceView.context = "session"

--- opts: figures (a function returning model.rows' rows, model.total's
-- row and the count column's name, "ticks" or "samples"), text (the
-- figures as text, for the clipboard), refresh_s, jank_ms (the jank
-- threshold, marked on the histogram).
function PerformanceView:new(opts)
  PerformanceView.super.new(self)
  self.scrollable = true
  self.figures, self.text = opts.figures, opts.text
  self.refresh_s, self.jank_ms = opts.refresh_s, opts.jank_ms
  self.listing = listing.new()
  self.drawn = {} -- each line drawn last, as its cells' texts: what the check reads
  self:refresh()
end

function PerformanceView.get_name()
  return "Performance"
end

--- Takes the figures now; the columns are fitted again at the next draw.
function PerformanceView:refresh()
  local rows, total, count = self.figures()
  self.count = count
  self.listing:set(rows, total)
  self.cols = nil
  self.next_refresh = system.get_time() + self.refresh_s
  core.redraw = true
end

-- Every refresh_s while shown: the tab in front of its node (a snapshot
-- and the profiler's places each time; none behind another tab).
function PerformanceView:update()
  if system.get_time() >= self.next_refresh then
    local node = core.root_view.root_node:get_node_for_view(self)
    if node and node.active_view == self then self:refresh() end
  end
  PerformanceView.super.update(self)
end

---------------------------------------------------------------------------
-- Geometry: a header on top, the detail at the bottom, the lines between
---------------------------------------------------------------------------

local function line_height()
  return style.font:get_height() + style.padding.y
end

local function header_height()
  return line_height() + style.divider_size
end

-- The detail: the line's figures, where its time went, the chart (its
-- counts, its bars of 2 lines at most, its bins) and its caption; it goes
-- when it would leave fewer than 3 lines.
local function chart_height()
  return 2 * line_height()
end

function PerformanceView:detail_height()
  local h = 4 * line_height() + style.font:get_height() + chart_height() + style.padding.y
  if self.size.y - header_height() - h < 3 * line_height() then return 0 end
  return h
end

function PerformanceView:page_lines()
  local h = self.size.y - header_height() - self:detail_height()
  return math.max(1, math.floor(h / line_height()))
end

function PerformanceView:get_scrollable_size()
  return header_height() + #self.listing.lines * line_height() + self:detail_height()
end

-- The line at screen point (x, y), or nil.
function PerformanceView:line_at(x, y)
  local top = self.position.y + header_height()
  local bottom = self.position.y + self.size.y - self:detail_height()
  if x < self.position.x or x >= self.position.x + self.size.x or y < top or y >= bottom then return nil end
  local i = math.floor((y - top + self.scroll.y) / line_height()) + 1
  return self.listing.lines[i] and i or nil
end

function PerformanceView:scroll_to_selected()
  local lh, i = line_height(), self.listing.selected
  local shown = self.size.y - header_height() - self:detail_height()
  self.scroll.to.y = math.min(self.scroll.to.y, (i - 1) * lh)
  self.scroll.to.y = math.max(self.scroll.to.y, i * lh - shown)
end

---------------------------------------------------------------------------
-- Drawing
---------------------------------------------------------------------------

local function measure(text)
  return style.font:get_width(text)
end

-- The columns, fitted again when the width or the font changes.
function PerformanceView:layout(width)
  if not self.cols or self.cols_width ~= width or self.cols_font ~= style.font then
    local rows = {}
    for _, r in ipairs(self.listing.rows) do rows[#rows + 1] = r end
    rows[#rows + 1] = self.listing.total
    self.cols = columns.fit(width, measure, {
      rows = rows, count = self.count, gap = style.padding.x, bar = math.floor(4 * style.font:get_height()),
    })
    self.cols_width, self.cols_font = width, style.font
  end
  return self.cols
end

local function draw_cells(cols, cells, x, y, h, color)
  for i, c in ipairs(cols) do
    local cx = x + c.x + (c.w - c.text_w)
    common.draw_text(style.font, color, cells[i], c.align, cx, y, c.text_w, h)
  end
end

local function draw_bar(c, share, x, y, h)
  if not c.bar or c.bar <= 0 then return end
  local bh = math.max(2, math.floor(h / 4))
  local by = y + math.floor((h - bh) / 2)
  renderer.draw_rect(x + c.x, by, c.bar, bh, style.selection)
  local w = math.floor(c.bar * math.min(share, 100) / 100 + 0.5)
  if share > 0 then renderer.draw_rect(x + c.x, by, math.max(1, w), bh, style.accent) end
end

function PerformanceView:draw_line(i, line, cols, x, y, w, h)
  local selected = i == self.listing.selected
  if selected or i == self.hovered then
    renderer.draw_rect(self.position.x, y, self.size.x, h, style.line_highlight)
  end
  if line.kind == "fold" then
    local icon = line.expanded and "-" or "+"
    local iw = style.icon_font:get_width("+")
    common.draw_text(style.icon_font, style.dim, icon, "left", x, y, iw, h)
    local text = ("%d idle (under %.2f ms of their own time)"):format(line.count, listing.IDLE_US / 1000)
    text = columns.truncate(text, w - iw - style.padding.x / 2, measure)
    common.draw_text(style.font, selected and style.accent or style.dim, text, "left",
      x + iw + style.padding.x / 2, y, w, h)
    self.drawn[#self.drawn + 1] = { key = line.key, text }
    return
  end
  local cells = columns.cells(cols, line.row, measure, self.count)
  local color = selected and style.accent or (line.idle and style.dim or style.text)
  if line.kind == "total" then
    renderer.draw_rect(x, y, w, style.divider_size, style.dim)
  end
  for _, c in ipairs(cols) do
    if c.key == "share" then draw_bar(c, line.row.share, x, y, h) end
  end
  draw_cells(cols, cells, x, y, h, color)
  cells.key = line.key
  self.drawn[#self.drawn + 1] = cells
end

function PerformanceView:draw_header(cols, x, y, h)
  renderer.draw_rect(self.position.x, self.position.y, self.size.x, header_height(), style.background)
  local titles = {}
  for i, c in ipairs(cols) do titles[i] = columns.truncate(c.title, c.text_w, measure) end
  draw_cells(cols, titles, x, y, h, style.dim)
  renderer.draw_rect(self.position.x, y + h, self.size.x, style.divider_size, style.divider)
end

-- The selected line's figures in words, where its time went, and the
-- histogram of its events by its own time: a bar per bin, its count
-- above, the bin below; the bins at or over the jank threshold in the
-- error colour, the one it falls in in the warning colour.
function PerformanceView:draw_detail(x, y, w)
  local lh = line_height()
  local line = self.listing:current()
  renderer.draw_rect(self.position.x, y, self.size.x, self.position.y + self.size.y - y, style.background)
  renderer.draw_rect(self.position.x, y, self.size.x, style.divider_size, style.divider)
  y = y + style.padding.y / 2
  if not line then return end
  if line.kind == "fold" then
    local names = {}
    for _, r in ipairs(self.listing.rows) do
      if r.self_us < listing.IDLE_US then names[#names + 1] = r.name end
    end
    local text = ("idle: %s"):format(table.concat(names, ", "))
    common.draw_text(style.font, style.text, columns.truncate(text, w, measure), "left", x, y, w, lh)
    return
  end
  local r = line.row
  local head = ("%s: self %s, cpu %s, %s of the editor's CPU time, %s %s, longest event %s"):format(
    r.name, columns.time(r.self_us), columns.time(r.cpu_us), columns.percent(r.share),
    columns.count(r[self.count]), self.count, r.longest)
  common.draw_text(style.font, style.accent, columns.truncate(head, w, measure), "left", x, y, w, lh)
  y = y + lh
  if r.hottest then
    common.draw_text(style.font, style.text, columns.truncate("hottest: " .. r.hottest, w, measure),
      "left", x, y, w, lh)
  end
  y = y + lh

  local bins = model.bins(r.durations)
  local most = 0
  for _, b in ipairs(bins) do most = math.max(most, b.count) end
  local label_w = measure("512-1024")
  local bw = math.min(math.floor(w / math.max(#bins, 1)), label_w + style.padding.x)
  local long = bw >= label_w + style.padding.x / 2
  local fh = style.font:get_height()
  local chart_h = chart_height()
  local base = y + fh + chart_h
  for k, b in ipairs(bins) do
    local bx = x + (k - 1) * bw
    local color = b.lo >= self.jank_ms and style.error or (b.hi > self.jank_ms and style.warn or style.accent)
    if b.count > 0 then
      local bh = math.max(2, math.floor(chart_h * math.log(1 + b.count) / math.log(1 + most)))
      renderer.draw_rect(bx + 2, base - bh, bw - 4, bh, color)
      common.draw_text(style.font, style.text, tostring(b.count), "center", bx, base - bh - fh, bw, fh)
    else
      renderer.draw_rect(bx + 2, base - 1, bw - 4, 1, style.dim)
    end
    local label = long and ("%d-%d"):format(b.lo, b.hi) or tostring(b.lo)
    common.draw_text(style.font, style.dim, label, "center", bx, base, bw, lh)
  end
  local caption = columns.truncate("its events by their own time, in ms (bars on a log scale)", w, measure)
  common.draw_text(style.font, style.dim, caption, "left", x, base + lh, w, lh)
end

function PerformanceView:draw()
  self:draw_background(style.background)
  local lh = line_height()
  local x = self.position.x + style.padding.x
  local w = self.size.x - 2 * style.padding.x - style.scrollbar_size
  local cols = self:layout(w)
  local top = self.position.y + header_height()
  local bottom = self.position.y + self.size.y - self:detail_height()

  self.drawn = {}
  core.push_clip_rect(self.position.x, top, self.size.x, math.max(0, bottom - top))
  local first = math.max(1, math.floor(self.scroll.y / lh) + 1)
  for i = first, #self.listing.lines do
    local y = top + (i - 1) * lh - self.scroll.y
    if y >= bottom then break end
    self:draw_line(i, self.listing.lines[i], cols, x, y, w, lh)
  end
  core.pop_clip_rect()

  self:draw_header(cols, x, self.position.y, lh)
  if bottom < self.position.y + self.size.y then self:draw_detail(x, bottom, w) end
  self:draw_scrollbar()
end

---------------------------------------------------------------------------
-- The mouse and the keys
---------------------------------------------------------------------------

function PerformanceView:on_mouse_moved(x, y, ...)
  if PerformanceView.super.on_mouse_moved(self, x, y, ...) then return true end
  local i = self:line_at(x, y)
  if i ~= self.hovered then core.redraw = true end
  self.hovered = i
end

function PerformanceView:on_mouse_left()
  PerformanceView.super.on_mouse_left(self)
  self.hovered = nil
end

-- A click selects a line; on the idle plugins' line it unfolds them, or
-- folds them again.
function PerformanceView:on_mouse_pressed(button, x, y, clicks)
  if PerformanceView.super.on_mouse_pressed(self, button, x, y, clicks) then return true end
  local i = self:line_at(x, y)
  if not i then return end
  self.listing:select(i)
  if button == "left" then self.listing:toggle() end
  core.redraw = true
  return true
end

local function moved(fn)
  return function(view)
    fn(view)
    view:scroll_to_selected()
    core.redraw = true
  end
end

command.add(PerformanceView, {
  ["perfmon:select-previous"] = moved(function(v) v.listing:move(-1) end),
  ["perfmon:select-next"] = moved(function(v) v.listing:move(1) end),
  ["perfmon:previous-page"] = moved(function(v) v.listing:page(-1, v:page_lines()) end),
  ["perfmon:next-page"] = moved(function(v) v.listing:page(1, v:page_lines()) end),
  ["perfmon:select-first"] = moved(function(v) v.listing:first() end),
  ["perfmon:select-last"] = moved(function(v) v.listing:last() end),
  ["perfmon:toggle-idle"] = moved(function(v) v.listing:toggle() end),
  ["perfmon:expand-idle"] = moved(function(v) v.listing:set_expanded(true) end),
  ["perfmon:collapse-idle"] = moved(function(v) v.listing:set_expanded(false) end),
  ["perfmon:copy-figures"] = function(v)
    system.set_clipboard(v.text())
    core.status_view:show_message("i", style.text, "perfmon: copied the figures as text")
  end,
})

keymap.add {
  ["up"] = "perfmon:select-previous",
  ["down"] = "perfmon:select-next",
  ["pageup"] = "perfmon:previous-page",
  ["pagedown"] = "perfmon:next-page",
  ["home"] = "perfmon:select-first",
  ["ctrl+home"] = "perfmon:select-first",
  ["end"] = "perfmon:select-last",
  ["ctrl+end"] = "perfmon:select-last",
  ["return"] = "perfmon:toggle-idle",
  ["right"] = "perfmon:expand-idle",
  ["left"] = "perfmon:collapse-idle",
  ["ctrl+c"] = "perfmon:copy-figures",
}

return PerformanceView
