import EncFSCLI

CommandLineTool.main(CtlCommand.run)
