// One long-lived thread that runs the compute of a step while the calling thread does I/O
// and MPI. Long-lived so that the OpenMP team it starts is reused from step to step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace attnbatch::distributed {

class BackgroundWorker {
public:
    BackgroundWorker() : thread_([this] { loop(); }) {}
    ~BackgroundWorker() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    BackgroundWorker(const BackgroundWorker&) = delete;
    BackgroundWorker& operator=(const BackgroundWorker&) = delete;

    void start(std::function<void()> task) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            task_ = std::move(task);
            busy_ = true;
            error_ = nullptr;
        }
        wake_.notify_all();
    }

    // True from start() until the task ends, however it ends; readable without the lock.
    const std::atomic<bool>& busy() const noexcept { return busy_; }

    // Waits for the task started last; rethrows what it threw.
    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [this] { return !busy_; });
        if (error_) {
            std::exception_ptr error = error_;
            error_ = nullptr;
            std::rethrow_exception(error);
        }
    }

private:
    void loop() {
        std::unique_lock<std::mutex> lock(mutex_);
        while (true) {
            wake_.wait(lock, [this] { return stopping_ || (busy_ && task_); });
            if (stopping_) return;
            std::function<void()> task = std::move(task_);
            task_ = nullptr;
            lock.unlock();
            std::exception_ptr error;
            try {
                task();
            } catch (...) {
                error = std::current_exception();
            }
            lock.lock();
            error_ = error;
            busy_ = false;
            done_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::function<void()> task_;
    std::atomic<bool> busy_{false};
    bool stopping_ = false;
    std::exception_ptr error_;
    std::thread thread_;
};

}  // namespace attnbatch::distributed
