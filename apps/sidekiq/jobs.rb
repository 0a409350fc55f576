# The Sidekiq workers of the sidekiq scenarios (scenario.rb), loaded by the
# `sidekiq -r` process. Every run is appended to a file outside the server
# (one line per run, O_APPEND), so "ran exactly once" is checked against
# what really ran.
require "sidekiq"

# redis-rb 4.8 warns on every SADD that Sidekiq's client makes.
Redis.silence_deprecations = true

Sidekiq.configure_server do |config|
  config.redis = { url: ENV.fetch("REDIS_URL") }
  # Look for due scheduled and retry jobs about every second (the default
  # is every 5 s after an initial wait of 10 s).
  Sidekiq.options[:average_scheduled_poll_interval] = 1
  Sidekiq.options[:poll_interval_average] = 1
end

Sidekiq.configure_client do |config|
  config.redis = { url: ENV.fetch("REDIS_URL") }
end

def record(*fields)
  File.open(File.join(ENV.fetch("APPS_SCRATCH"), "runs.log"), File::WRONLY | File::APPEND | File::CREAT) do |f|
    f.write(fields.join(" ") + "\n")
  end
end

class SquareJob
  include Sidekiq::Worker

  def perform(i)
    record("square", i, i * i)
  end
end

class StampJob
  include Sidekiq::Worker

  def perform(label)
    record("stamp", label, format("%.3f", Time.now.to_f))
  end
end

# Fails on its first attempt and succeeds on the second; retried one second
# after the failure (plus Sidekiq's jitter of 0 to 9 s).
class FlakyJob
  include Sidekiq::Worker
  sidekiq_options retry: 5
  sidekiq_retry_in { |_count, _exception| 1 }

  def perform(id)
    attempt = Sidekiq.redis { |c| c.incr("flaky:#{id}:attempts") }
    record("flaky", id, attempt, format("%.3f", Time.now.to_f))
    raise "flaky #{id} attempt #{attempt}" if attempt < 2
  end
end

# Always fails; after its one retry it lands in the dead set.
class DoomedJob
  include Sidekiq::Worker
  sidekiq_options retry: 1
  sidekiq_retry_in { |_count, _exception| 1 }

  def perform(id)
    record("doomed", id)
    raise "doomed #{id}"
  end
end

# A job of the durability run: takes a moment, so that a crash lands among
# jobs in flight.
class SlowJob
  include Sidekiq::Worker
  sidekiq_options retry: false

  def perform(i)
    sleep 0.02
    record("slow", i, jid)
  end
end
