-- autosave-backup: copies the document to the backup store on every save.
--
-- The blocking plugin of the demo.  editor.backup() is a synchronous write
-- to a slow remote store (about 100 ms per call): the thread waits, burning
-- no CPU, and the host declares the wait to perfmon as a blocking call.
-- Every save freezes the editor for that long, and the plugin watcher says
-- so.

local backups = 0

editor.on_save(function()
  editor.backup(editor.text())
  backups = backups + 1
  editor.status(("backups: %d"):format(backups))
end)
