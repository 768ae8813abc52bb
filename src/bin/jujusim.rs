fn main() -> std::process::ExitCode {
    etcd_charm::sim::main()
}
