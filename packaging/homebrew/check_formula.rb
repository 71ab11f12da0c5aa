#!/usr/bin/env ruby
# frozen_string_literal: true

# Checks packaging/homebrew/kernel-watchdog.rb on a machine without Homebrew (this project's
# are Debian; `brew audit` and `brew style` need Homebrew itself). Ruby has parsed the file
# (`ruby -c`, tests/CMakeLists.txt); here it is loaded against a recorder of the Formula DSL
# calls it makes, and
#   - its `service do` block must say what launchd/org.kernel-watchdog.daemon.plist says (the
#     agent that `kernel-watchdog service install` writes): arguments, run at load, keep-alive,
#     process type, log files; a plist key this check does not map fails it;
#   - its dependencies must be the Homebrew packages the GitHub workflow's macOS job builds
#     with (.github/workflows/ci.yml), so that the formula builds what CI built.
# Usage: check_formula.rb [REPO_ROOT]; exit status 1 with the differences on stderr.

require "pathname"
require "rexml/document"
require "yaml"

ROOT = Pathname(ARGV.fetch(0, File.join(__dir__, "../.."))).expand_path

# The class-level DSL of Homebrew's Formula, as far as the formula uses it, recorded.
class Formula
  class << self
    attr_reader :settings, :dependencies, :service_block, :test_block

    %i[desc homepage license head url sha256].each do |name|
      define_method(name) { |*args, **options| (@settings ||= {})[name] = [args, options] }
    end

    def depends_on(spec)
      (@dependencies ||= []) << (spec.is_a?(Hash) ? spec.keys.first : spec)
    end

    def service(&block)
      @service_block = block
    end

    def test(&block)
      @test_block = block
    end
  end
end

# What a `service do` block sets, with the paths it is given.
class ServiceRecorder
  KNOWN = %i[run run_type keep_alive process_type log_path error_log_path].freeze
  attr_reader :settings

  def initialize
    @settings = {}
  end

  def opt_bin
    Pathname("/opt/homebrew/opt/kernel-watchdog/bin")
  end

  def var
    Pathname("/opt/homebrew/var")
  end

  KNOWN.each { |name| define_method(name) { |value| @settings[name] = value } }

  def method_missing(name, *_args)
    raise NoMethodError, "the service block calls `#{name}`, which this check does not map to the plist"
  end

  def respond_to_missing?(_name, _include_private = false)
    false
  end
end

# A property list's <dict> as a Hash (strings, booleans, arrays, dicts).
def plist_value(element)
  case element.name
  when "dict"
    element.elements.each_slice(2).to_h { |key, value| [key.text, plist_value(value)] }
  when "array" then element.elements.map { |value| plist_value(value) }
  when "string" then element.text.to_s
  when "true" then true
  when "false" then false
  else raise "plist: #{element.name} is not read here"
  end
end

problems = []
load ROOT.join("packaging/homebrew/kernel-watchdog.rb").to_s
formula = Object.const_get(:KernelWatchdog)
problems << "the formula has no service block" unless formula.service_block

service = ServiceRecorder.new
service.instance_eval(&formula.service_block) if formula.service_block
got = service.settings
plist_file = ROOT.join("launchd/org.kernel-watchdog.daemon.plist")
plist = plist_value(REXML::Document.new(plist_file.read).root.elements["dict"])

plist.each do |key, value|
  case key
  when "Label"
    nil # Homebrew names its agents homebrew.mxcl.<formula>
  when "ProgramArguments"
    run = Array(got[:run]).map(&:to_s)
    unless File.basename(run.first.to_s) == "kernel-watchdog" && run.drop(1) == value.drop(1)
      problems << "service run #{run.inspect}: the plist runs kernel-watchdog #{value.drop(1).join(" ")}"
    end
  when "RunAtLoad"
    # Homebrew's agents run at load unless run_type is :interval or :cron.
    at_load = [nil, :immediate].include?(got[:run_type])
    problems << "service run_type #{got[:run_type].inspect}: the plist's RunAtLoad is #{value}" if at_load != value
  when "KeepAlive"
    names = { "SuccessfulExit" => :successful_exit, "Crashed" => :crashed }
    wanted = value.is_a?(Hash) ? value.to_h { |k, v| [names.fetch(k), v] } : { always: value }
    keep_alive = got[:keep_alive].is_a?(Hash) ? got[:keep_alive] : { always: got[:keep_alive] }
    problems << "service keep_alive #{keep_alive.inspect}: the plist says #{value.inspect}" if keep_alive != wanted
  when "ProcessType"
    type = got[:process_type].to_s.capitalize
    problems << "service process_type #{got[:process_type].inspect}: the plist says #{value}" if type != value
  when "StandardOutPath", "StandardErrorPath"
    name = key == "StandardOutPath" ? :log_path : :error_log_path
    if File.basename(got[name].to_s) != File.basename(value)
      problems << "service #{name} #{got[name]}: the plist writes #{File.basename(value)}"
    end
  else
    problems << "the plist's #{key} is not mapped to the formula by this check"
  end
end

workflow = YAML.safe_load(ROOT.join(".github/workflows/ci.yml").read)
brew_line = workflow.dig("jobs", "macos", "steps").map { |step| step["run"].to_s }
                    .find { |run| run.include?("brew install") }
if brew_line.nil?
  problems << "the workflow's macos job installs nothing with brew"
else
  ci_packages = brew_line[/brew install(.*)/m, 1].split.sort
  formula_packages = (formula.dependencies || []).sort
  if ci_packages != formula_packages
    problems << "dependencies #{formula_packages.join(" ")}; the macOS job installs #{ci_packages.join(" ")}"
  end
end

%i[desc homepage license].each do |name|
  problems << "the formula has no #{name}" unless formula.settings&.key?(name)
end
unless formula.settings&.key?(:head) || formula.settings&.key?(:url)
  problems << "the formula has neither url nor head"
end
problems << "the formula has no test block" unless formula.test_block

if problems.empty?
  puts "check_formula: kernel-watchdog.rb agrees with #{plist_file.basename} " \
       "(#{plist.size} keys) and the macOS job's #{formula.dependencies.size} Homebrew packages"
else
  problems.each { |problem| warn "check_formula: #{problem}" }
  exit 1
end
