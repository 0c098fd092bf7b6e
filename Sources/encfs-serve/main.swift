import EncFSCLI
import EncFSServe

CommandLineTool.main(ServeCommand.run)
