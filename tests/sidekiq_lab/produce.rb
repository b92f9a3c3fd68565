# Pushes the lab's jobs: `ruby produce.rb KEY:BEHAVIOUR...`; prints one "key jid" per push.
require_relative "app"

ARGV.each do |spec|
  key, behaviour = spec.split(":", 2)
  jid = Sidekiq::Client.push("class" => ChargeJob, "args" => [key, behaviour], "queue" => ENV.fetch("LAB_QUEUE"))
  puts "#{key} #{jid}"
end
