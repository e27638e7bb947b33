#include "attnbatch/distributed/coordinator.hpp"

#include <algorithm>
#include <new>

#include "attnbatch/error.hpp"
#include "attnbatch/io/output/fault_injection.hpp"
#include "attnbatch/distributed/cpu_clocks.hpp"
#include "attnbatch/distributed/stop_point.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "background_worker.hpp"
#include "wall_clock.hpp"

namespace attnbatch::distributed {

double RankTimes::hidden_fraction() const {
    const double io_seconds = read + write + communicate;
    if (io_seconds <= 0) return 1.0;
    return std::clamp(1.0 - exposed / io_seconds, 0.0, 1.0);
}

std::vector<double> RankTimes::pack() const {
    return {wall, read, write, communicate, compute, idle, static_cast<double>(units), static_cast<double>(steps),
            static_cast<double>(sequences), static_cast<double>(tokens), attention_flops, projection_flops, exposed,
            direct_bytes, compute_cpu, compute_system, io_cpu, wait, static_cast<double>(row_block)};
}

RankTimes RankTimes::unpack(const double* v) {
    RankTimes t;
    t.wall = v[0];
    t.read = v[1];
    t.write = v[2];
    t.communicate = v[3];
    t.compute = v[4];
    t.idle = v[5];
    t.units = static_cast<std::int64_t>(v[6]);
    t.steps = static_cast<std::int64_t>(v[7]);
    t.sequences = static_cast<std::int64_t>(v[8]);
    t.tokens = static_cast<std::int64_t>(v[9]);
    t.attention_flops = v[10];
    t.projection_flops = v[11];
    t.exposed = v[12];
    t.direct_bytes = v[13];
    t.compute_cpu = v[14];
    t.compute_system = v[15];
    t.io_cpu = v[16];
    t.wait = v[17];
    t.row_block = static_cast<std::int64_t>(v[18]);
    return t;
}

namespace {

std::int64_t sequences_in(const Round& round) {
    std::int64_t count = 0;
    for (const RankStep& step : round) count += step.sequences_done;
    return count;
}

struct Slot {
    io::InputBlock input;
    StepOutputs results;  // what `output` points into
    io::OutputBlock output;
    bool has_output = false;
    ComputeTally tally;
    double busy = 0;
    double finished_at = 0;  // wall clock when the compute thread finished this slot's step
};

}  // namespace

RunResult run_rounds(Comm& comm, const RunContext& context, Scheduler& scheduler, StepIo& step_io) {
    const std::size_t me = static_cast<std::size_t>(comm.rank());
    // One computer for both slots: the weights packed once, the scratch shared (one compute runs at a time).
    StepComputer computer(context.spec, context.weights, context.settings, context.layout);
    Slot slots[2];
    IoTimes io_times;
    LocalFailure failure;
    RankTimes mine;
    RunResult result;
    double cost_done = 0;

    const auto io_total = [&io_times] { return io_times.read + io_times.write + io_times.communicate; };
    std::int64_t stored_sequences = 0;
    RoundProgress progress;
    // After every round: a failure on any rank fails every rank; a stop signal on any rank
    // stops every rank once this round's results (`pending`) are stored.
    double agreement_wait = 0;  // in the rounds' agreements: waiting for the slowest rank
    const auto agreed_on = [&](auto&& collective) {
        const double t0 = wall_seconds();
        const auto outcome = collective();
        agreement_wait += wall_seconds() - t0;
        return outcome;
    };
    const auto fail_if_any = [&]() {
        const AgreedError agreed = agreed_on([&] { return agree(comm, failure.code, failure.message); });
        if (agreed.code == 0) return;
        step_io.abandon();
        throw AgreedFailure(agreed.code, agreed.message);
    };
    const auto settle = [&](const Round* pending, const Slot* pending_slot) {
        fail_if_any();
        const std::int64_t own_signal = stop_signal();
        const int signal = static_cast<int>(agreed_on([&] { return comm.max(own_signal); }));
        if (signal == 0) return;
        if (pending) {
            step_io.store(*pending, pending_slot->has_output ? &pending_slot->output : nullptr, io_times, failure);
            stored_sequences += sequences_in(*pending);
        }
        fail_if_any();
        step_io.abandon();
        // This rank's own signal and the phase it came in, when it had one.
        const bool own = stop_signal() != 0;
        throw AgreedFailure(exit_interrupted, stop_message(own ? stop_signal() : signal, own ? stop_phase() : current_phase(),
                                                           stored_sequences));
    };

    BackgroundWorker worker;
    // The worker is busy exactly while a step computes, so that the whole chunks written
    // meanwhile take no core from it (OutputFile::watch_compute); unwatched before it goes.
    step_io.watch_compute(&worker.busy());
    struct Unwatch {
        StepIo& io;
        ~Unwatch() { io.watch_compute(nullptr); }
    } unwatch{step_io};
    // The waits between steps may poll; those beside a running step must sleep (Comm).
    comm.set_compute_idle(true);
    struct IdleReset {
        Comm& comm;
        ~IdleReset() { comm.set_compute_idle(false); }
    } idle_reset{comm};
    const double t_start = wall_seconds();
    const CpuSeconds main_start = thread_cpu_times();
    Round current = scheduler.next(comm, 0.0);
    step_io.fetch(current, slots[0].input, io_times, failure);
    mine.exposed += io_total();  // nothing to overlap the first read with
    settle(nullptr, nullptr);
    const double t_rounds = wall_seconds();
    result.phases.first_read = t_rounds - t_start;
    Round previous;
    bool have_previous = false;
    for (std::size_t k = 0; !round_is_empty(current); ++k) {
        Slot& slot = slots[k % 2];
        Slot& other = slots[(k + 1) % 2];
        const RankStep& step = current[me];
        const bool computing = !step.empty() && !failure && slot.input.count > 0;
        if (computing) {
            comm.set_compute_idle(false);
            worker.start([&slot, &computer] {
                const double t0 = wall_seconds();
                computer.compute(slot.input, slot.results, slot.output, slot.tally);
                slot.finished_at = wall_seconds();
                slot.busy += slot.finished_at - t0;
            });
        }
        const double io_before = io_total();
        if (have_previous) {
            step_io.store(previous, other.has_output ? &other.output : nullptr, io_times, failure);
            stored_sequences += sequences_in(previous);
        }
        const double rate = mine.compute > 0 ? cost_done / mine.compute : 0.0;
        Round next = scheduler.next(comm, rate);
        step_io.fetch(next, other.input, io_times, failure);
        const double io_done_at = wall_seconds(), io_spent = io_total() - io_before;
        slot.has_output = false;
        if (computing) {
            try {
                worker.wait();
                slot.has_output = true;
                // The I/O of this round is exposed only where it outlasted the compute.
                mine.exposed += std::clamp(io_done_at - slot.finished_at, 0.0, io_spent);
                mine.compute += slot.busy;
                slot.busy = 0;
                cost_done += step.cost;
                mine.units += step.unit_count;
                mine.steps += 1;
            } catch (const std::bad_alloc&) {
                failure.set(exit_out_of_memory, "out of memory computing sequences [" + std::to_string(step.first) + ", " +
                                                std::to_string(step.last) + "); hint: lower --max-memory");
            } catch (const std::exception& e) {
                failure.set(exit_internal, std::string("internal error computing sequences: ") + e.what());
            }
        }
        comm.set_compute_idle(true);
        if (!slot.has_output) mine.exposed += io_spent;
        settle(&current, &slot);
        progress.rounds += 1;
        for (const RankStep& done : current) {
            progress.units += done.unit_count;
            progress.sequences += done.sequences_done;
            progress.cost += done.cost;
        }
        if (context.on_round) context.on_round(progress);
        io::fault_point("after_unit", progress.units);
        previous = std::move(current);
        have_previous = true;
        current = std::move(next);
        ++result.rounds;
    }
    enter_phase(Phase::final_flush);
    const double io_before_end = io_total();
    const double t_last_write = wall_seconds();
    result.phases.rounds = t_last_write - t_rounds;
    if (have_previous) {
        Slot& last = slots[(result.rounds + 1) % 2];
        step_io.store(previous, last.has_output ? &last.output : nullptr, io_times, failure);
        stored_sequences += sequences_in(previous);
    }
    // The last stop point: from here on the output is published whatever comes.
    settle(nullptr, nullptr);
    result.phases.last_write = wall_seconds() - t_last_write;
    pass_last_stop_point();
    step_io.finish(io_times);
    result.phases.close = io_times.close;
    result.phases.publish = io_times.publish;
    enter_phase(Phase::shut_down);
    mine.exposed += io_total() - io_before_end;  // nothing left to overlap the last write with

    mine.wall = wall_seconds() - t_start;
    mine.io_cpu = thread_cpu_times().since(main_start).total;
    mine.read = io_times.read;
    mine.write = io_times.write;
    mine.communicate = io_times.communicate;
    mine.direct_bytes = io_times.direct_bytes;
    mine.row_block = kernels::row_block(context.settings.kernel);
    mine.wait = agreement_wait + io_times.wait;
    mine.idle = std::max(0.0, mine.wall - mine.compute);
    for (const Slot& s : slots) {
        mine.sequences += s.tally.sequences;
        mine.tokens += s.tally.tokens;
        mine.attention_flops += s.tally.attention_flops;
        mine.projection_flops += s.tally.projection_flops;
        mine.compute_cpu += s.tally.cpu;
        mine.compute_system += s.tally.cpu_system;
    }
    const std::vector<double> all = comm.all_gather(mine.pack());
    for (int r = 0; r < comm.size(); ++r) {
        result.ranks.push_back(RankTimes::unpack(all.data() + static_cast<std::size_t>(r) * RankTimes::fields));
    }
    result.collective_fallback = step_io.collective_fallback();
    return result;
}

}  // namespace attnbatch::distributed
