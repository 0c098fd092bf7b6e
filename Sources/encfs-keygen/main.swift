import EncFSCLI
#if canImport(Glibc)
import Glibc
#endif

exit(KeygenCommand.run(rawArguments()))
