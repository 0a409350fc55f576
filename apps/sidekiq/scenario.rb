# Sidekiq (Debian's ruby-sidekiq and ruby-redis): a `sidekiq` process works
# jobs pushed by Sidekiq::Client.
#   scenario.rb jobs       200 jobs, each run once with the right result;
#                          Sidekiq's processed counter agrees.
#   scenario.rb scheduled  perform_in jobs run on time; a job failing
#                          once is retried (with its backoff) and succeeds
#                          on the second attempt; a job out of retries goes
#                          to the dead set.
require "redis"
require "sidekiq"
require "sidekiq/api"
require_relative "jobs"

$mode = ARGV.fetch(0)
$log = File.join(ENV.fetch("APPS_SCRATCH"), "runs.log")
$redis = Redis.new(url: ENV.fetch("REDIS_URL"))
$redis.flushdb

def check(cond, what)
  raise "check failed: #{what}" unless cond
  puts "ok: #{what}"
end

def equal(got, want, what)
  raise "check failed: #{what}: got #{got.inspect[0, 300]}, want #{want.inspect[0, 300]}" unless got == want
  puts "ok: #{what} (#{got.inspect[0, 60]})"
end

def within(v, low, high, what)
  raise "check failed: #{what}: #{v.round(3)} not in [#{low}, #{high}]" unless v >= low && v <= high
  puts "ok: #{what} (#{v.round(3)} in [#{low}, #{high}])"
end

def runs
  File.exist?($log) ? File.readlines($log).map(&:split) : []
end

# A command error in the sidekiq process's log ends the wait at once: the
# process keeps running and retrying, so waiting longer would only hide it.
def sidekiq_errors
  File.exist?($sidekiq_log) ? File.readlines($sidekiq_log).grep(/ERR |CommandError|unknown command/) : []
end

def wait_until(timeout, what, stop_on_errors: true)
  deadline = Time.now + timeout
  until yield
    errors = stop_on_errors ? sidekiq_errors : []
    raise "check failed: #{what}: sidekiq met a command error: #{errors.first}" unless errors.empty?
    raise "check failed: #{what} (not within #{timeout}s)" if Time.now > deadline
    sleep 0.1
  end
end

$sidekiq_log = File.join(ENV.fetch("APPS_SCRATCH"), "sidekiq.log")
$sidekiq = Process.spawn("sidekiq", "-r", File.join(__dir__, "jobs.rb"), "-c", "5", "-t", "5",
                         out: $sidekiq_log, err: [:child, :out])
at_exit do
  begin
    Process.kill("TERM", $sidekiq)
    Process.wait($sidekiq)
  rescue Errno::ESRCH, Errno::ECHILD
  end
  # Sidekiq logs the command errors it met; show them with the result.
  errors = sidekiq_errors
  puts "sidekiq log errors:", errors.first(5) unless errors.empty?
end

case $mode
when "jobs"
  ids = (0...200).map { |i| SquareJob.perform_async(i) }
  equal(ids.compact.uniq.size, 200, "200 jobs pushed, each with its own id")
  # The scheduled-set poller's errors (it needs Lua) are the other mode's
  # business: this one is about jobs pushed for now.
  wait_until(60, "200 jobs ran", stop_on_errors: false) { runs.count { |r| r[0] == "square" } >= 200 }
  sleep 0.5 # anything that would run twice has had time to
  squares = runs.select { |r| r[0] == "square" }
  equal(squares.map { |r| r[1].to_i }.sort, (0...200).to_a, "every job ran exactly once")
  equal(squares.all? { |r| r[2].to_i == r[1].to_i**2 }, true, "every result is right")
  wait_until(10, "Sidekiq's processed counter reaches 200", stop_on_errors: false) { Sidekiq::Stats.new.processed >= 200 }
  equal(Sidekiq::Stats.new.processed, 200, "Sidekiq::Stats processed")
  equal(Sidekiq::Stats.new.failed, 0, "Sidekiq::Stats failed")
  equal(Sidekiq::Queue.new("default").size, 0, "the queue is empty")
when "scheduled"
  # The scheduled-set poller starts after a random wait of up to 5 s.
  wait_until(30, "the sidekiq process registered") { Sidekiq::ProcessSet.new.size == 1 }
  sleep 5
  pushed = Time.now.to_f
  StampJob.perform_in(2, "in2")
  StampJob.perform_in(4, "in4")
  equal(Sidekiq::ScheduledSet.new.size, 2, "two jobs in the scheduled set")
  FlakyJob.perform_async("f1")
  DoomedJob.perform_async("d1")
  # The time each retry was scheduled for, as the retry set holds it.
  retry_at = Hash.new { |h, k| h[k] = [] }
  wait_until(40, "the scheduled jobs ran, the flaky job succeeded and the doomed one died") do
    Sidekiq::RetrySet.new.each { |j| retry_at[j.args[0]] |= [j.at.to_f] }
    r = runs
    r.count { |x| x[0] == "stamp" } >= 2 && r.count { |x| x[0] == "flaky" } >= 2 && Sidekiq::DeadSet.new.size >= 1
  end
  sleep 1
  stamps = runs.select { |r| r[0] == "stamp" }.to_h { |r| [r[1], r[2].to_f] }
  equal(stamps.keys.sort, %w[in2 in4], "each scheduled job ran once")
  # The poller looks every 0.5 to 1.5 s.
  within(stamps["in2"] - pushed, 2.0, 4.0, "perform_in(2) ran after (s)")
  within(stamps["in4"] - pushed, 4.0, 6.0, "perform_in(4) ran after (s)")
  flaky = runs.select { |r| r[0] == "flaky" }
  equal(flaky.map { |r| r[2].to_i }, [1, 2], "the flaky job ran twice, succeeding on its retry")
  equal(retry_at["f1"].size, 1, "the flaky job's retry was seen in the retry set")
  # Its backoff: 1 s plus Sidekiq's jitter of 0 to 9 s.
  within(retry_at["f1"][0] - flaky[0][3].to_f, 1.0, 10.1, "retry scheduled after the failure by (s)")
  within(flaky[1][3].to_f - retry_at["f1"][0], -0.05, 2.0, "retry ran after the time it was scheduled for by (s)")
  equal(runs.count { |r| r[0] == "doomed" }, 2, "the doomed job ran twice (one retry)")
  dead = Sidekiq::DeadSet.new.to_a
  equal(dead.map { |j| [j.klass, j.args] }, [["DoomedJob", ["d1"]]], "the doomed job is in the dead set")
  equal(Sidekiq::RetrySet.new.size, 0, "nothing left in the retry set")
  equal(Sidekiq::ScheduledSet.new.size, 0, "nothing left in the scheduled set")
else
  abort "unknown mode #{$mode}"
end
puts "sidekiq #{$mode}: all checks passed"
