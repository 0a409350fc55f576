# The enqueuing side of the Sidekiq durability run (py/durability.py):
# pushes N SlowJobs with Sidekiq::Client, the first 40% at once (the
# worker is started after them, so a backlog waits in the queue), the
# rest about one every 5 ms, and
# records each push's outcome in pushes.log as it happens: "acked I JID"
# once perform_async returned, "failed I ERROR" when it raised (the
# server was down; such a push may or may not have been stored). A failed
# push is not retried: the run is about what the server acknowledged.
require "sidekiq"
require_relative "jobs"

n = Integer(ARGV.fetch(0))
log = File.open(File.join(ENV.fetch("APPS_SCRATCH"), "pushes.log"), "a")
log.sync = true
n.times do |i|
  begin
    jid = SlowJob.perform_async(i)
    log.puts("acked #{i} #{jid}")
  rescue StandardError => e
    log.puts("failed #{i} #{e.class}")
    sleep 0.05
  end
  sleep 0.005 if i >= n * 0.4
end
log.puts("done")
