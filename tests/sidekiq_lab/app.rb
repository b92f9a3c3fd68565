# The Sidekiq lab's jobs, as a team would write them: nothing in them is for dupescope.
# The lab's settings (below) only shorten Sidekiq's waits so that a retry comes in seconds.
require "sidekiq"
require "sidekiq/job_retry"
require "json"
require "securerandom"

REDIS = { url: ENV.fetch("LAB_REDIS_URL") }
Sidekiq.configure_server { |config| config.redis = REDIS }
Sidekiq.configure_client { |config| config.redis = REDIS }
# The JSON log format is one line of configuration (Sidekiq 6.4; 7 spells it
# `config.logger.formatter = Sidekiq::Logger::Formatters::JSON.new`).
Sidekiq.log_formatter = Sidekiq::Logger::Formatters::JSON.new if ENV["LAB_JSON_LOGS"] == "1"
# Look for due retries every second instead of every 5-15 s.
Sidekiq.options[:poll_interval_average] = 1

# The side-effect ledger (tests/support/ledger.py's rows, as JSON lines): one append per
# row, on a file opened for appending, so lines from many processes never mix.
def ledger(kind, key, jid, run)
  row = { kind: kind, key: key, job_id: jid, run: run, worker: "sidekiq", pid: Process.pid,
          t: Time.now.to_f }
  File.open(ENV.fetch("LAB_LEDGER"), "a") { |file| file.write(JSON.generate(row) + "\n") }
end

class ChargeJob
  include Sidekiq::Worker
  sidekiq_options retry: 3
  # A failed charge is retried at once (Sidekiq adds up to 9 s of jitter to this; the lab
  # takes it out below).
  sidekiq_retry_in { |_count, _exception| 1 }

  def perform(key, behaviour)
    run = SecureRandom.hex(8)
    first = Sidekiq.redis { |conn| conn.incr("lab:runs:#{jid}") } == 1
    ledger("effect", key, jid, run)
    if behaviour == "fail_once" && first
      ledger("raised", key, jid, run)
      raise "card declined, try again"
    end
    sleep 30 if behaviour == "slow" && first
    sleep 0.05
    ledger("done", key, jid, run)
  end
end

# No jitter on retries in the lab: a retry is due as soon as it is scheduled.
module LabRetryNow
  def delay_for(*) = 0
end
Sidekiq::JobRetry.prepend(LabRetryNow)
